// Command reconciler is the scheduled Lambda (EventBridge Scheduler, every
// minute) that keeps every task moving: expired leases, unknown outcomes by
// provider readback, the outbox relay, age budgets, the dead-letter queue
// drain and the EMF metrics. The logic lives in internal/reconciler; this
// file reads the environment, builds the dependencies and starts the
// runtime.
//
// Environment: TASKS_TABLE, REVIEW_TABLE, TASK_QUEUE_URL and
// DEAD_LETTER_QUEUE_URL (required); PROVIDER and PROVIDER_* (the provider
// read back for unknown outcomes; see internal/provider); LOG_LEVEL
// (debug|info|warn|error).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func main() {
	log := logging.FromEnv()
	h, err := build(context.Background(), os.Getenv)
	if err != nil {
		log.Error("reconciler: init failed", "error", err.Error())
		fmt.Fprintln(os.Stderr, "reconciler:", err)
		os.Exit(1)
	}
	h.Log = log
	lambda.Start(h.Handle)
}

// required are the variables template.yaml sets.
var required = []string{"TASKS_TABLE", "REVIEW_TABLE", "TASK_QUEUE_URL", "DEAD_LETTER_QUEUE_URL"}

func build(ctx context.Context, getenv func(string) string) (*reconciler.Handler, error) {
	env := map[string]string{}
	for _, k := range required {
		v := getenv(k)
		if v == "" {
			return nil, fmt.Errorf("environment variable %s is required (set by template.yaml)", k)
		}
		env[k] = v
	}
	cfg, err := awsclient.Load(ctx, awsclient.Options{})
	if err != nil {
		return nil, err
	}
	pcfg := provider.ConfigFromEnv(getenv)
	pcfg.AWS = &cfg
	// The simulated provider's idempotency ledger lives in the worker's
	// process, not this one: never claim "never happened" from ours.
	pcfg.NoReadback = true
	p, err := provider.New(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	l, err := ledger.New(awsclient.DynamoDB(cfg), ledger.Config{TasksTable: env["TASKS_TABLE"], ReviewTable: env["REVIEW_TABLE"]})
	if err != nil {
		return nil, err
	}
	sq := awsclient.SQS(cfg)
	return &reconciler.Handler{
		Ledger:   l,
		Dispatch: &dispatch.Sender{SQS: sq, QueueURL: env["TASK_QUEUE_URL"]},
		DLQ:      sq,
		DLQURL:   env["DEAD_LETTER_QUEUE_URL"],
		Provider: p,
		Metrics:  metrics.NewWriter(os.Stdout),
	}, nil
}
