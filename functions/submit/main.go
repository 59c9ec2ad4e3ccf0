// Command submit is the HTTP API Lambda (API Gateway HTTP API, payload 2.0):
// POST /tasks, GET /tasks/{id}, POST /tasks/{id}/regenerate and
// POST /tasks/{id}/cancel. The logic lives in internal/api; this file reads
// the environment, builds the dependencies and starts the Lambda runtime.
//
// Environment: TASKS_TABLE, REVIEW_TABLE, TASK_QUEUE_URL (required),
// ALLOWED_ORIGINS (comma-separated CORS allow-list; "*" allows any; empty
// disables CORS), LOG_LEVEL (debug|info|warn|error).
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/lambdaenv"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
)

func main() {
	log := logging.FromEnv()
	h, err := build(context.Background())
	if err != nil {
		lambdaenv.Exit(log, "submit", err)
	}
	h.Log = log
	lambda.Start(h.Handle)
}

func build(ctx context.Context) (*api.Handler, error) {
	b, err := lambdaenv.Load(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	return &api.Handler{
		Ledger:         b.Ledger,
		Dispatch:       &dispatch.Sender{SQS: awsclient.SQS(b.AWS), QueueURL: b.TaskQueueURL},
		Metrics:        metrics.NewWriter(os.Stdout),
		AllowedOrigins: api.ParseOrigins(os.Getenv("ALLOWED_ORIGINS")),
	}, nil
}
