// Command reconciler is the scheduled Lambda (EventBridge Scheduler, every
// minute) that keeps every task moving: expired leases, unknown outcomes by
// provider readback, the outbox relay, age budgets, the dead-letter queue
// drain and the EMF metrics. The logic lives in internal/reconciler; this
// file reads the environment, builds the dependencies and starts the
// runtime.
//
// Environment: TASKS_TABLE, REVIEW_TABLE, WATCH_TABLE (the submissions it
// reads once each, to find a task whose message was lost), TASK_QUEUE_URL
// and DEAD_LETTER_QUEUE_URL (required); PROVIDER and PROVIDER_* (the provider
// read back for unknown outcomes; see internal/provider); PAYLOAD_BUCKET (the
// S3 claim-check bucket for large read-back results; unset keeps them
// inline); LOG_LEVEL (debug|info|warn|error).
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/lambdaenv"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/spend"
)

func main() {
	log := logging.FromEnv()
	h, err := build(context.Background(), os.Getenv)
	if err != nil {
		lambdaenv.Exit(log, "reconciler", err)
	}
	h.Log = log
	lambda.Start(h.Handle)
}

func build(ctx context.Context, getenv func(string) string) (*reconciler.Handler, error) {
	b, err := lambdaenv.Load(ctx, getenv)
	if err != nil {
		return nil, err
	}
	dlqURL := getenv("DEAD_LETTER_QUEUE_URL")
	if dlqURL == "" {
		return nil, lambdaenv.Missing("DEAD_LETTER_QUEUE_URL")
	}
	pcfg := provider.ConfigFromEnv(getenv)
	pcfg.AWS = &b.AWS
	// The simulated provider's idempotency ledger lives in the worker's
	// process, not this one: never claim "never happened" from ours.
	pcfg.NoReadback = true
	p, err := provider.NewReadback(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	payloads, err := lambdaenv.Payloads(b.AWS, getenv)
	if err != nil {
		return nil, err
	}
	dests, err := lambdaenv.Destinations(b.AWS, getenv)
	if err != nil {
		return nil, err
	}
	notify, err := lambdaenv.Notifications(getenv, dests) // TASKLEDGER_NOTIFICATIONS
	if err != nil {
		return nil, err
	}
	// Settles what parked runs' attempts still hold on budgets and daily
	// quotas: items of the tasks table, whatever the spend configuration.
	acct, err := spend.NewAccountant(spend.AccountantConfig{DB: awsclient.DynamoDB(b.AWS), TasksTable: b.TasksTable})
	if err != nil {
		return nil, err
	}
	sq := awsclient.SQS(b.AWS)
	return &reconciler.Handler{
		Ledger:       b.Ledger,
		Dispatch:     &dispatch.Sender{SQS: sq, QueueURL: b.TaskQueueURL},
		Backlog:      &dispatch.Backlog{SQS: sq, QueueURL: b.TaskQueueURL},
		DLQ:          sq,
		DLQURL:       dlqURL,
		Provider:     p,
		Destinations: dests,
		Notify:       notify,
		Metrics:      metrics.NewWriter(os.Stdout),
		Payloads:     payloads,
		Spend:        acct,
		// GENERATION_EFFECT_CLASS: retry-safe unless declared an effect.
		RetrySafeGeneration: pcfg.RetrySafeGeneration(),
	}, nil
}
