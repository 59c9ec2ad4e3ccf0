// Command worker is the SQS consumer Lambda: it claims each task a message
// names, calls the provider under a heartbeat, saves the result fenced on the
// assignment version, and answers with a partial batch response
// (ReportBatchItemFailures). The logic lives in internal/worker; this file
// reads the environment, builds the dependencies and starts the runtime.
//
// Environment: TASKS_TABLE, REVIEW_TABLE, WATCH_TABLE, TASK_QUEUE_URL
// (required, as every function's); LEASE_SECONDS (the claim's lease,
// default 30; the heartbeat runs every third of it); WORKER_CONCURRENCY
// (records of a batch processed at once, default
// worker.DefaultConcurrency; keep it at least the event source's
// BatchSize); PROVIDER and PROVIDER_* (see internal/provider; PROVIDER_TIMEOUT
// is the call timeout the worker admits records by); PROVIDER_ADMISSION
// (optional JSON of per-model requests and tokens per minute, shared by
// every instance through the tasks table: admission.ParseSettings, read by
// lambdaenv.LoadProvider as in the submit function; unset: no admission);
// PAYLOAD_BUCKET (the S3 claim-check bucket: large inputs are read from
// it, results above 4 KiB written to it; unset keeps them inline);
// CONNECTIONS_TABLE and STREAM_MANAGEMENT_ENDPOINT (streamed replies:
// deltas posted to the task's WebSocket subscribers; unset: no streaming);
// LOG_LEVEL (debug|info|warn|error). template.yaml sets them as one arithmetic
// (docs/timing.md).
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/lambdaenv"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/internal/stream"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func main() {
	log := logging.FromEnv()
	h, err := build(context.Background())
	if err != nil {
		lambdaenv.Exit(log, "worker", err)
	}
	h.Log = log
	lambda.Start(h.Handle)
}

func build(ctx context.Context) (*worker.Handler, error) {
	lease := worker.DefaultLease
	if v := os.Getenv("LEASE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 || n > 900 {
			return nil, fmt.Errorf("LEASE_SECONDS=%q: want an integer from 3 to 900", v)
		}
		lease = time.Duration(n) * time.Second
	}
	concurrency := worker.DefaultConcurrency
	if v := os.Getenv("WORKER_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return nil, fmt.Errorf("WORKER_CONCURRENCY=%q: want an integer from 1 to 1000", v)
		}
		concurrency = n
	}
	b, err := lambdaenv.Load(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	pcfg := provider.ConfigFromEnv(nil)
	pcfg.AWS = &b.AWS
	p, err := provider.New(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	pp, err := lambdaenv.LoadProvider(pcfg, os.Getenv)
	if err != nil {
		return nil, err
	}
	adm, err := buildAdmission(b, pp)
	if err != nil {
		return nil, err
	}
	sp, err := lambdaenv.LoadSpend(b, os.Getenv)
	if err != nil {
		return nil, err
	}
	var ws *worker.Spend
	if sp != nil {
		ws = &worker.Spend{Prices: sp.Prices, Budgets: sp.Budgets, Quotas: sp.Quotas}
	}
	payloads, err := lambdaenv.Payloads(b.AWS, os.Getenv)
	if err != nil {
		return nil, err
	}
	dests, err := lambdaenv.Destinations(b.AWS, os.Getenv)
	if err != nil {
		return nil, err
	}
	streams, err := buildStreams(b)
	if err != nil {
		return nil, err
	}
	notify, err := lambdaenv.Notifications(os.Getenv, dests) // TASKLEDGER_NOTIFICATIONS
	if err != nil {
		return nil, err
	}
	return &worker.Handler{
		Streams:      streams,
		Admission:    adm,
		Spend:        ws,
		Ledger:       b.Ledger,
		Payloads:     payloads,
		Provider:     p,
		Destinations: dests,
		Notify:       notify,
		SQS:          awsclient.SQS(b.AWS),
		QueueURL:     b.TaskQueueURL,
		Policy:       retrypolicy.Default(),
		Lease:        lease,
		Concurrency:  concurrency,
		Metrics:      metrics.NewWriter(os.Stdout),
		// GENERATION_EFFECT_CLASS: retry-safe unless declared an effect.
		RetrySafeGeneration: pcfg.RetrySafeGeneration(),
	}, nil
}

// buildStreams builds the fan-out of streamed replies (docs/streaming.md)
// from CONNECTIONS_TABLE and STREAM_MANAGEMENT_ENDPOINT (the WebSocket
// API's @connections root); nil (no streaming) when either is unset.
func buildStreams(b *lambdaenv.Base) (worker.Streams, error) {
	table, endpoint := os.Getenv("CONNECTIONS_TABLE"), os.Getenv("STREAM_MANAGEMENT_ENDPOINT")
	if table == "" || endpoint == "" {
		return nil, nil
	}
	if !strings.HasPrefix(endpoint, "https://") {
		return nil, fmt.Errorf("STREAM_MANAGEMENT_ENDPOINT=%q: want the WebSocket API's https:// stage URL", endpoint)
	}
	fan := &stream.Fanout{Subs: &stream.Table{DB: awsclient.DynamoDB(b.AWS), ConnectionsTable: table},
		Poster: stream.NewConnectionsClient(b.AWS, endpoint), Log: logging.FromEnv()}
	return worker.StreamsFunc(func(ctx context.Context, taskID string, attempt int) worker.StreamAttempt {
		return fan.Begin(ctx, taskID, attempt)
	}), nil
}

// buildAdmission builds the admission pp's settings describe
// (lambdaenv.LoadProvider: PROVIDER_ADMISSION, its limits checked for the
// provider's model); nil (no admission) when unset.
func buildAdmission(b *lambdaenv.Base, pp *lambdaenv.Provider) (*worker.Admission, error) {
	if pp.Admission == nil {
		return nil, nil
	}
	a, err := admission.New(admission.Config{DB: awsclient.DynamoDB(b.AWS), TasksTable: b.TasksTable, Limits: pp.Admission.Limits()})
	if err != nil {
		return nil, err
	}
	return &worker.Admission{Admitter: a, Model: pp.Model}, nil
}
