// Command taskledger-bench measures taskledger against DESIGN.md §9 on an
// emulator and prints a table (see package bench). It exits 1 when the
// happy path makes more AWS calls per task than the budget, 2 when the bench
// could not run; timings are reported, never judged.
//
//	go run ./cmd/taskledger-bench            # make bench
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/taskledger/taskledger/internal/bench"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/soak"
)

func main() {
	backend := os.Getenv("TASKLEDGER_BACKEND")
	if backend == "" {
		backend = "kumo"
	}
	var (
		tasks   = flag.Int("n", 1000, "tasks per pipeline")
		callers = flag.Int("callers", 8, "concurrent callers")
		latency = flag.Int("latency", 300, "submits timed one at a time")
		history = flag.String("history", "10,10000", "completed-task counts for the reconciler read cost")
		admN    = flag.Int("admission-n", 1000, "tasks of each provider admission burst (negative: skip)")
		noBuild = flag.Bool("skip-build", false, "skip the bootstrap builds")
		timeout = flag.Duration("timeout", 20*time.Minute, "give up after this long")
		costN   = flag.Int("cost-tasks", 5, "tasks per workload and system in the cost comparison")
		noCost  = flag.Bool("skip-cost", false, "skip the cost comparison")
		latN    = flag.Int("latency-tasks", 20, "tasks of the latency line")
		latSpec = flag.String("call-latency", "DynamoDB=5ms,SQS=10ms,S3=15ms", "per-call AWS latency injected for the latency line")
		noLat   = flag.Bool("skip-latency", false, "skip the latency line")
	)
	flag.StringVar(&backend, "backend", backend, "kumo, moto or external (AWS_ENDPOINT_URL); default $TASKLEDGER_BACKEND or kumo")
	flag.Parse()
	cfg := bench.Config{Tasks: *tasks, Callers: *callers, LatencySubmits: *latency, SkipBuild: *noBuild, Progress: os.Stderr,
		CostTasks: *costN, SkipCost: *noCost, LatencyTasks: *latN, SkipLatency: *noLat, AdmissionTasks: *admN}
	lat, err := faultinject.ParseLatency(*latSpec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "taskledger-bench: -call-latency:", err)
		os.Exit(2)
	}
	cfg.Latency = lat
	for _, f := range strings.Split(*history, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "taskledger-bench: -history %q: want comma-separated counts\n", *history)
			os.Exit(2)
		}
		cfg.History = append(cfg.History, n)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *timeout)
	defer cancelT()
	b, err := soak.OpenBackend(ctx, backend)
	if err != nil {
		fmt.Fprintln(os.Stderr, "taskledger-bench:", err)
		os.Exit(2)
	}
	res, err := bench.Run(ctx, b, cfg)
	b.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "taskledger-bench:", err)
		os.Exit(2)
	}
	res.WriteTable(os.Stdout)
	fmt.Println()
	bench.WriteStreamingTable(os.Stdout, bench.DefaultStreamingWorkload(), bench.PricesUSEast1)
	if len(res.Excess()) > 0 {
		os.Exit(1)
	}
}
