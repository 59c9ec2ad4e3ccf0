// Command taskledger-demo runs the seed workflows (shared/seeds 000, 001,
// 004; package internal/demo) against the local stack `make run` starts —
// the embedded kumo emulator, the simulated provider, the simulated
// notify, publish and crm destinations — driving everything through the
// HTTP API (submit, poll, approve, withdraw, reject). It prints progress
// lines and one block per scenario with each receipt, and exits 1 if any
// scenario fails (`make demo`).
//
// Environment:
//
//	TASKLEDGER_DESTINATIONS  the destinations (default demo.Destinations: every
//	                         delivery's reply lost, readback visible after 2s);
//	                         the email destination and the lambda function
//	                         "example" are added unless named (demo.WithPeople)
//	TASKLEDGER_NOTIFICATIONS who is mailed (default demo.Notify: the approvers)
//	RECONCILE_EVERY          the reconciler's period (default 1s)
//	AWS_ENDPOINT_URL         an external endpoint instead of the embedded emulator
//	DEMO_VERBOSE             set: also print the stack's own progress lines
//
// The stack listens on a free loopback port and is stopped at the end.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/demo"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/lambdarie"
	"github.com/taskledger/taskledger/internal/local"
)

func main() {
	ok, err := run(os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "taskledger-demo:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(out io.Writer) (bool, error) {
	raw := os.Getenv(deliver.EnvVar)
	if raw == "" {
		raw = demo.Destinations
	}
	dests, err := deliver.ParseConfig(raw)
	if err != nil {
		return false, err
	}
	every := time.Second
	if v := os.Getenv("RECONCILE_EVERY"); v != "" {
		if every, err = time.ParseDuration(v); err != nil || every < 100*time.Millisecond {
			return false, fmt.Errorf("RECONCILE_EVERY=%q: want a duration of at least 100ms, e.g. 1s", v)
		}
	}
	var progress io.Writer
	if os.Getenv("DEMO_VERBOSE") != "" {
		progress = out
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	notify := demo.Notify
	if v, set := os.LookupEnv(followup.EnvVar); set {
		notify = v
	}
	// Scenario 015 delivers to the example receiving function, built as
	// deployed and run under aws-lambda-rie (as make run does); where RIE
	// cannot be built, its handler in process behind the Invoke API.
	fmt.Fprintln(out, "taskledger-demo: starting the example lambda function under aws-lambda-rie…")
	var lambdaURL, fn string
	if ex, err := local.StartExampleDestination(ctx, func(line string) { fmt.Fprintln(out, "taskledger-demo: "+line) }); err == nil {
		defer ex.Stop()
		lambdaURL, fn = ex.URL, lambdarie.FunctionName
	} else {
		fmt.Fprintf(out, "taskledger-demo: aws-lambda-rie not available (%v); serving the example function's handler in process\n", err)
		f := demo.ServeExampleFunction()
		defer f.Close()
		lambdaURL, fn = f.URL, "arn:aws:lambda:us-east-1:123456789012:function:example"
	}
	demo.WithPeople(&dests, fn)

	fmt.Fprintln(out, "taskledger-demo: starting the local stack (embedded emulator, simulated provider and destinations)…")
	st, err := local.Start(ctx, local.Options{
		Addr: "127.0.0.1:0", Endpoint: os.Getenv("AWS_ENDPOINT_URL"), Destinations: dests, Notify: notify, LambdaEndpoint: lambdaURL,
		ReconcileEvery: every, StatusEvery: -1, Progress: progress,
	})
	if err != nil {
		return false, err
	}
	defer st.Close()
	fmt.Fprintf(out, "taskledger-demo: API %s, emulator %s, destinations %v\n", st.URL, st.Endpoint, st.Destinations.Names())
	fmt.Fprintf(out, "taskledger-demo: destinations config %s\n", raw)

	tg := &demo.Target{
		URL: st.URL, Sims: st.Destinations.Sims,
		Hold: st.PausePoller, Release: st.ResumePoller,
		Idle:     demo.QueueIdle(st.SQS, st.Names.TaskQueueURL, 200*time.Millisecond),
		Progress: out,
		Lookup:   demo.LambdaLookup(lambdaURL, fn),
	}
	if st.Embedded {
		tg.Mail = demo.SentMail(st.Endpoint, "kumo")
	} else if backend := os.Getenv("TASKLEDGER_BACKEND"); backend != "" {
		tg.Mail = demo.SentMail(st.Endpoint, backend)
	}
	var failed []string
	for _, sc := range demo.Scenarios() {
		fmt.Fprintf(out, "\n--- seed %s: %s\n", sc.ID, sc.Title)
		start := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		res, err := sc.Run(sctx, tg)
		cancel()
		demo.Print(out, res, err)
		fmt.Fprintf(out, "    (%s)\n", time.Since(start).Round(100*time.Millisecond))
		if err != nil {
			failed = append(failed, sc.ID)
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			return false, errors.New("interrupted")
		}
	}
	fmt.Fprintln(out)
	if len(failed) > 0 {
		fmt.Fprintf(out, "taskledger-demo: FAILED: seed %v\n", failed)
		return false, nil
	}
	fmt.Fprintf(out, "taskledger-demo: all %d scenarios passed\n", len(demo.Scenarios()))
	return true, nil
}
