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
// kumo runs 150 tasks; moto, which serves one request at a time (about a
// second per Query on a busy machine), 42 tasks that are all faulted (two
// per task kind), with a reconciler budget long enough to walk its streams.
func TestSoak(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		cfg := soak.Config{N: 150, Seed: 7}
		if e.Backend == "moto" {
			cfg = soak.Config{N: 2 * len(soak.TaskKinds()), Seed: 7, FaultShare: 1, SubmitRate: 10,
				ReconcileEvery: 2 * time.Second, ReconcileBudget: 20 * time.Second, MaxAge: 2 * time.Minute}
		}
		var progress bytes.Buffer
		cfg.Progress = &progress
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		rep, err := soak.Run(ctx, &soak.Env{Backend: e.Backend, AWS: e.AWS, Names: e.Names}, cfg)
		if err != nil {
			t.Fatalf("soak could not run: %v\n%s", err, progress.String())
		}
		var table bytes.Buffer
		rep.WriteTable(&table)
		if !rep.OK() {
			t.Errorf("%d violations:\n%s", len(rep.Violations), table.String())
		}
		if under := rep.Under(1); len(under) > 0 {
			t.Errorf("fault kinds never injected: %v\n%s", under, table.String())
		}
		if rep.Accepted != cfg.N {
			t.Errorf("%d of %d tasks stored", rep.Accepted, cfg.N)
		}
		if testing.Verbose() {
			t.Logf("\n%s", table.String())
		}
	})
}
