// Command exampledestination is the example receiving function of the
// lambda destination (template.yaml's ExampleDestinationFunction, deployed
// only with DeployExampleDestination=true; `make run` runs it under the
// Lambda Runtime Interface Emulator). It keeps the contract of
// docs/destinations.md: at most one effect per operation id, a receipt, and
// the lookup action. The logic lives in internal/destination/lambda/example;
// this file reads the environment, builds the store and starts the runtime.
//
// Environment: EXAMPLE_TABLE (the DynamoDB table of records, partition key
// operation_id; unset: records in memory, for local runs only);
// LOG_LEVEL (debug|info|warn|error).
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/destination/lambda/example"
	"github.com/taskledger/taskledger/internal/lambdaenv"
	"github.com/taskledger/taskledger/internal/logging"
)

func main() {
	log := logging.FromEnv()
	h := &example.Handler{Log: log}
	if table := os.Getenv("EXAMPLE_TABLE"); table != "" {
		cfg, err := awsclient.Load(context.Background(), awsclient.Options{})
		if err != nil {
			lambdaenv.Exit(log, "exampledestination", err)
		}
		h.Store = &example.DynamoDB{Client: awsclient.DynamoDB(cfg), Table: table}
	} else {
		h.Store = example.NewMemory()
	}
	lambda.Start(h.Handle)
}
