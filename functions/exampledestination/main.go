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
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/destination/lambda/example"
	"github.com/taskledger/taskledger/internal/logging"
)

func main() {
	log := logging.FromEnv()
	h := &example.Handler{Log: log}
	if table := os.Getenv("EXAMPLE_TABLE"); table != "" {
		cfg, err := awsclient.Load(context.Background(), awsclient.Options{})
		if err != nil {
			log.Error("exampledestination: init failed", "error", err.Error())
			fmt.Fprintln(os.Stderr, "exampledestination:", err)
			os.Exit(1)
		}
		h.Store = &example.DynamoDB{Client: awsclient.DynamoDB(cfg), ExampleDestinationTable: table}
	} else {
		h.Store = example.NewMemory()
	}
	lambda.Start(h.Handle)
}
