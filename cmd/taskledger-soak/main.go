// Command taskledger-soak runs the soak test of package soak: N tasks through
// the real handlers and emulated event sources with faults injected on a
// seeded schedule, then checks every invariant and prints the table — once
// per provider mode (idempotent, plain, plain+readback), in sequence, each
// on a fresh stack. It exits 1 on any violation or when a fault kind was
// injected fewer than -min-injected times in a mode, 2 when a run itself
// could not be carried out.
//
//	go run ./cmd/taskledger-soak -n 2000            # make soak N=2000
//	go run ./cmd/taskledger-soak -n 500 -modes plain
//	TASKLEDGER_BACKEND=moto go run ./cmd/taskledger-soak -n 200
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
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
		maxQueued  = flag.Int("max-queued", 300, "submitters wait while the task queue holds this many visible messages outside backlog windows (negative: no bound)")
		minInj     = flag.Int("min-injected", -1, "fail when a fault kind was injected fewer times (default: 20 at n>=2000, else 1)")
		background = flag.String("background", "", `background AWS fault rules, e.g. "DynamoDB.*:throttle=0.01" ("none" disables; default: soak.DefaultBackground)`)
		logLevel   = flag.String("log", "", "write the handlers' JSON logs to stderr at this level (debug, info, warn, error)")
		modes      = flag.String("modes", "idempotent,plain,plain+readback", "provider modes to run, in sequence, comma separated")
		timeout    = flag.Duration("timeout", 60*time.Minute, "give up after this long (all modes)")
		paced      = flag.String("paced", "auto", "measure the engine first and slow the clock and the submit rate to what it sustains (soak.Config.PacedTo): true, false, or auto (every backend but the embedded kumo, whose figures are the budgets' baseline)")
	)
	flag.StringVar(&backend, "backend", backend, "kumo, moto or external (AWS_ENDPOINT_URL); default $TASKLEDGER_BACKEND or kumo")
	flag.Parse()
	pace := backend != "kumo"
	switch *paced {
	case "auto":
	case "true", "false":
		pace = *paced == "true"
	default:
		fmt.Fprintf(os.Stderr, "taskledger-soak: -paced: want true, false or auto, got %q\n", *paced)
		os.Exit(2)
	}
	if *minInj < 0 {
		*minInj = 1
		if *n >= 2000 {
			*minInj = 20
		}
	}
	var runModes []soak.Mode
	for _, name := range strings.Split(*modes, ",") {
		m, err := soak.ParseMode(strings.TrimSpace(name))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		runModes = append(runModes, m)
	}
	cfg := soak.Config{N: *n, Seed: *seed, FaultShare: *share, SubmitRate: *rate, MaxQueued: *maxQueued, Paced: pace, Progress: os.Stderr}
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
	b, err := soak.OpenBackend(ctx, backend)
	if err != nil {
		fmt.Fprintln(os.Stderr, "taskledger-soak:", err)
		os.Exit(2)
	}
	defer b.Close()
	start := time.Now()
	code := 0
	var summary []string
	for _, m := range runModes {
		c := cfg
		c.Mode = m
		rep, err := runMode(ctx, b, c)
		if err != nil {
			fmt.Fprintf(os.Stderr, "taskledger-soak: mode %s: %v\n", m, err)
			b.Close()
			os.Exit(2)
		}
		fmt.Printf("\n=== provider mode %s ===\n", m)
		rep.WriteTable(os.Stdout)
		verdict := "PASS"
		if !rep.OK() {
			fmt.Printf("\nFAIL (%s): %d violations\n", m, len(rep.Violations))
			verdict, code = "FAIL", 1
		}
		if under := rep.Under(*minInj); len(under) > 0 {
			fmt.Printf("\nFAIL (%s): fault kinds injected fewer than %d times: %v\n", m, *minInj, under)
			verdict, code = "FAIL", 1
		}
		summary = append(summary, fmt.Sprintf("  %-15s %s  %d violations  %s", m, verdict, len(rep.Violations), rep.Elapsed.Round(time.Second)))
	}
	fmt.Printf("\n=== %d tasks per mode, %d modes in sequence, %s in all ===\n%s\n", *n, len(runModes), time.Since(start).Round(time.Second), strings.Join(summary, "\n"))
	if code == 0 {
		fmt.Printf("\nPASS: zero violations; every fault kind injected at least %d times in every mode\n", *minInj)
	}
	b.Close()
	os.Exit(code)
}

// runMode runs one mode's soak on a fresh stack of b.
func runMode(ctx context.Context, b *soak.Backend, cfg soak.Config) (*soak.Report, error) {
	env, drop, err := b.NewEnv(ctx, "soak")
	if err != nil {
		return nil, err
	}
	defer drop()
	return soak.Run(ctx, env, cfg)
}
