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
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func main() {
	log := logging.FromEnv()
	h, err := build(context.Background())
	if err != nil {
		log.Error("submit: init failed", "error", err.Error())
		fmt.Fprintln(os.Stderr, "submit:", err)
		os.Exit(1)
	}
	h.Log = log
	lambda.Start(h.Handle)
}

func build(ctx context.Context) (*api.Handler, error) {
	env := map[string]string{}
	for _, k := range []string{"TASKS_TABLE", "REVIEW_TABLE", "TASK_QUEUE_URL"} {
		v := os.Getenv(k)
		if v == "" {
			return nil, fmt.Errorf("environment variable %s is required (set by template.yaml)", k)
		}
		env[k] = v
	}
	cfg, err := awsclient.Load(ctx, awsclient.Options{})
	if err != nil {
		return nil, err
	}
	l, err := ledger.New(awsclient.DynamoDB(cfg), ledger.Config{TasksTable: env["TASKS_TABLE"], ReviewTable: env["REVIEW_TABLE"]})
	if err != nil {
		return nil, err
	}
	return &api.Handler{
		Ledger:         l,
		Dispatch:       &dispatch.Sender{SQS: awsclient.SQS(cfg), QueueURL: env["TASK_QUEUE_URL"]},
		Metrics:        metrics.NewWriter(os.Stdout),
		AllowedOrigins: api.ParseOrigins(os.Getenv("ALLOWED_ORIGINS")),
	}, nil
}
