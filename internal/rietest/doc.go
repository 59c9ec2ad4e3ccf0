// Package rietest proves that the deployed artifacts behave like the code
// the other tests exercise: it builds the three functions' bootstrap
// binaries exactly as `make build` does (CGO_ENABLED=0, -tags lambda.norpc,
// -trimpath, stripped) for the host architecture, runs each under the AWS
// Lambda Runtime Interface Emulator (aws-lambda-rie, built from the Go
// module proxy at a pinned version), and invokes them with every sample in
// events/ against the embedded kumo emulator.
//
// # Model
//
// Two copies of the stack's resources are made on one kumo server: one for
// the artifacts under RIE, one for the same handlers called in-process. The
// same sequence of events (the samples, with task ids substituted where a
// sample names a task that must exist) goes to both, and each pair of
// responses must match after normalisation: status codes, headers and JSON
// bodies equal, with timestamps and durations (clock readings) reduced to
// their presence. Task ids need no normalisation: they derive from the
// caller scope and the Idempotency-Key, so both copies produce the same ids.
//
// The functions get the environment template.yaml gives them (Globals and
// their own Variables, with !Ref resolved to the local resource names and
// parameters to their defaults), plus AWS_ENDPOINT_URL pointing at kumo,
// static credentials and the function's Timeout and MemorySize as RIE's
// AWS_LAMBDA_FUNCTION_TIMEOUT and AWS_LAMBDA_FUNCTION_MEMORY_SIZE.
//
// # RIE
//
// aws-lambda-rie is built with `go install module@version` into a temporary
// GOBIN (the build cache makes later runs take seconds), or taken from
// $TASKLEDGER_RIE when set. Each instance gets two free 127.0.0.1 ports:
// --runtime-interface-emulator-address (the invoke endpoint,
// POST /2015-03-31/functions/function/invocations) and --runtime-api-address
// (the Runtime API the bootstrap polls; the default 127.0.0.1:9001 would
// collide between instances and test runs). When RIE cannot be built (no
// network, no proxy) the test is skipped with the reason, or fails when
// TASKLEDGER_REQUIRE_RIE=1 (CI).
package rietest
