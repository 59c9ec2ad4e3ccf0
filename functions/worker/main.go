// Command worker is the SQS consumer Lambda: it claims each task a message
// names, calls the provider under a heartbeat, saves the result fenced on the
// assignment version, and answers with a partial batch response
// (ReportBatchItemFailures). The logic lives in internal/worker; this file
// reads the environment, builds the dependencies and starts the runtime.
//
// Environment: TASKS_TABLE, REVIEW_TABLE, TASK_QUEUE_URL (required);
// LEASE_SECONDS (the claim's lease, default 30; the heartbeat runs every
// third of it); PROVIDER and PROVIDER_* (see internal/provider); LOG_LEVEL
// (debug|info|warn|error).
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func main() {
	log := logging.FromEnv()
	h, err := build(context.Background())
	if err != nil {
		log.Error("worker: init failed", "error", err.Error())
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	h.Log = log
	lambda.Start(h.Handle)
}

func build(ctx context.Context) (*worker.Handler, error) {
	env := map[string]string{}
	for _, k := range []string{"TASKS_TABLE", "REVIEW_TABLE", "TASK_QUEUE_URL"} {
		v := os.Getenv(k)
		if v == "" {
			return nil, fmt.Errorf("environment variable %s is required (set by template.yaml)", k)
		}
		env[k] = v
	}
	lease := worker.DefaultLease
	if v := os.Getenv("LEASE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 || n > 900 {
			return nil, fmt.Errorf("LEASE_SECONDS=%q: want an integer from 3 to 900", v)
		}
		lease = time.Duration(n) * time.Second
	}
	cfg, err := awsclient.Load(ctx, awsclient.Options{})
	if err != nil {
		return nil, err
	}
	pcfg := provider.ConfigFromEnv(nil)
	pcfg.AWS = &cfg
	p, err := provider.New(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	l, err := ledger.New(awsclient.DynamoDB(cfg), ledger.Config{TasksTable: env["TASKS_TABLE"], ReviewTable: env["REVIEW_TABLE"]})
	if err != nil {
		return nil, err
	}
	return &worker.Handler{
		Ledger:   l,
		Provider: p,
		SQS:      awsclient.SQS(cfg),
		QueueURL: env["TASK_QUEUE_URL"],
		Policy:   retrypolicy.Default(),
		Lease:    lease,
		Metrics:  metrics.NewWriter(os.Stdout),
	}, nil
}
