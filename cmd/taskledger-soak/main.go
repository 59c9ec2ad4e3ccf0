// Command taskledger-soak runs the soak test of package soak: N tasks through
// the real handlers and emulated event sources with faults injected on a
// seeded schedule, then checks every invariant and prints the table. It
// exits 1 on any violation or when a fault kind was injected fewer than
// -min-injected times, 2 when the run itself could not be carried out.
//
//	go run ./cmd/taskledger-soak -n 2000            # make soak N=2000
//	TASKLEDGER_BACKEND=moto go run ./cmd/taskledger-soak -n 200
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/soak"
)

func main() {
	backend := os.Getenv("TASKLEDGER_BACKEND")
	if backend == "" {
		backend = "kumo"
	}
	var (
		n          = flag.Int("n", 2000, "tasks")
		seed       = flag.Int64("seed", 1, "seed of the fault schedule")
		share      = flag.Float64("share", 0.5, "share of tasks with a planned fault")
		rate       = flag.Float64("rate", 60, "new tasks per second (negative: unpaced)")
		minInj     = flag.Int("min-injected", -1, "fail when a fault kind was injected fewer times (default: 20 at n>=2000, else 1)")
		background = flag.String("background", "", `background AWS fault rules, e.g. "DynamoDB.*:throttle=0.01" ("none" disables; default: soak.DefaultBackground)`)
		logLevel   = flag.String("log", "", "write the handlers' JSON logs to stderr at this level (debug, info, warn, error)")
		timeout    = flag.Duration("timeout", 15*time.Minute, "give up after this long")
	)
	flag.StringVar(&backend, "backend", backend, "kumo, moto or external (AWS_ENDPOINT_URL); default $TASKLEDGER_BACKEND or kumo")
	flag.Parse()
	if *minInj < 0 {
		*minInj = 1
		if *n >= 2000 {
			*minInj = 20
		}
	}
	cfg := soak.Config{N: *n, Seed: *seed, FaultShare: *share, SubmitRate: *rate, Progress: os.Stderr}
	switch *background {
	case "":
	case "none":
		cfg.NoBackground = true
	default:
		rules, err := faultinject.ParseRules(*background)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		cfg.Background = rules
	}
	if *logLevel != "" {
		cfg.Log = logging.New(os.Stderr, *logLevel)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *timeout)
	defer cancelT()
	env, closeEnv, err := soak.StartBackend(ctx, backend)
	if err != nil {
		fmt.Fprintln(os.Stderr, "taskledger-soak:", err)
		os.Exit(2)
	}
	rep, err := soak.Run(ctx, env, cfg)
	closeEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "taskledger-soak:", err)
		os.Exit(2)
	}
	rep.WriteTable(os.Stdout)
	code := 0
	if !rep.OK() {
		fmt.Printf("\nFAIL: %d violations\n", len(rep.Violations))
		code = 1
	}
	if under := rep.Under(*minInj); len(under) > 0 {
		fmt.Printf("\nFAIL: fault kinds injected fewer than %d times: %v\n", *minInj, under)
		code = 1
	}
	if code == 0 {
		fmt.Printf("\nPASS: zero violations; every fault kind injected at least %d times\n", *minInj)
	}
	os.Exit(code)
}
