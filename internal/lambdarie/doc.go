// Package lambdarie runs a Go Lambda function's bootstrap under the AWS
// Lambda Runtime Interface Emulator (aws-lambda-rie), so a local run or a
// test can invoke the real artifact through the Lambda Invoke API.
//
// Install builds aws-lambda-rie from the Go module proxy at the pinned
// Version into a directory (the build cache makes later calls take
// seconds), or takes $TASKLEDGER_RIE. Build builds a function package the
// way `make build` does (CGO_ENABLED=0, -tags lambda.norpc, -trimpath,
// stripped) for the host. Start runs the bootstrap under RIE on two free
// 127.0.0.1 ports — the invoke API and the Runtime API the bootstrap polls
// — with exactly the environment given (plus region, static credentials
// and the function's name, timeout and memory), and Stop ends its process
// group.
//
// RIE serves the Invoke API at
// POST /2015-03-31/functions/function/invocations: an SDK Lambda client
// whose BaseEndpoint is Process.URL invokes it with FunctionName
// "function". It runs one invocation at a time.
package lambdarie
