package soak_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The short soak: every fault kind injected at least once, zero violations.
// kumo runs every provider mode, 108 tasks each (two per task
// kind); moto, which serves one request at a time (about a second per
// Query on a busy machine), the plain mode only (the unforgiving one), with
// two tasks per kind, all faulted, longer invocations and a reconciler
// budget long enough to walk its streams. The dispatch deadline is 4 s, so a backlog window (6 s)
// outlives it.
func TestSoak(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		modes := soak.Modes()
		base := soak.Config{N: 4 * len(soak.TaskKinds()), Seed: 7, DispatchTimeout: 4 * time.Second}
		if e.Backend == "moto" {
			modes = []soak.Mode{soak.ModePlain}
			// Invocations of 30 s with a 2 s margin (20 s were too few
			// once admission added its writes to every call): moto's serialised
			// writes would otherwise miss deadlines the handlers meet
			// everywhere else (a stale worker's pause does not wait for
			// the slow reconciler walk: it reconciles its task itself). The
			// visibility stays short, or every redelivery would wait 20 s.
			base = soak.Config{N: 2 * len(soak.TaskKinds()), Seed: 7, FaultShare: 1, SubmitRate: 10, DispatchTimeout: 4 * time.Second,
				FunctionTimeout: 30 * time.Second, DeadlineMargin: 2 * time.Second, Visibility: 6 * time.Second,
				ReconcileEvery: 2 * time.Second, ReconcileBudget: 20 * time.Second, MaxAge: 2 * time.Minute}
		}
		for i, m := range modes {
			cfg := base
			cfg.Mode = m
			// A fresh stack for every mode after the first: the checker
			// reads whole tables.
			t.Run(string(m), func(t *testing.T) { soakOnce(t, e, cfg, i > 0) })
		}
	})
}

func soakOnce(t *testing.T, e *testenv.Env, cfg soak.Config, fresh bool) {
	soak.HoldSoakSlot(t)
	env := &soak.Env{Backend: e.Backend, AWS: e.AWS, Names: e.Names}
	if fresh {
		b := &soak.Backend{Name: e.Backend, AWS: e.AWS}
		var drop func()
		var err error
		env, drop, err = b.NewEnv(context.Background(), "soak")
		if err != nil {
			t.Fatal(err)
		}
		defer drop()
	}
	var progress bytes.Buffer
	cfg.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := soak.Run(ctx, env, cfg)
	if err != nil {
		t.Fatalf("soak could not run: %v\n%s", err, progress.String())
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if len(rep.Violations) > 0 {
		t.Errorf("%d violations:\n%s", len(rep.Violations), table.String())
	}
	if under := rep.Under(1); len(under) > 0 {
		t.Errorf("fault kinds never injected: %v\n%s", under, table.String())
	}
	// Every task but the quota caller's refused ones is stored, and so is
	// every accepted regenerate.
	if want := cfg.N - rep.Refused + rep.Regenerates; rep.Accepted != want {
		t.Errorf("%d of %d tasks stored (%d submitted, %d refused over quota, %d regenerates)", rep.Accepted, want, cfg.N, rep.Refused, rep.Regenerates)
	}
	if rep.Mode != cfg.Mode {
		t.Errorf("report mode %q, want %q", rep.Mode, cfg.Mode)
	}
	if testing.Verbose() {
		t.Logf("\n%s", table.String())
	}
}
