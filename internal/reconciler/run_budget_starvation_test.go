package reconciler_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// hungLookupBut is a provider whose readback hangs for every operation but
// one, which it finds at once.
type hungLookupBut struct {
	*simulated.Provider
	answers string // the operation id read back at once
}

func (p hungLookupBut) Lookup(ctx context.Context, op string) (contract.Result, error) {
	if op == p.answers {
		return contract.Result{Output: []byte(`{"text":"found"}`), ProviderRef: "ref-" + op}, nil
	}
	<-ctx.Done()
	return contract.Result{}, ctx.Err()
}

// TestTaskBehindHungReadbacksIsReconciledWithinOnePeriod: DESIGN §1.1 —
// every task ends final "within its age budget plus one reconciler
// period". The walk stops starting tasks of a page once the run's work
// budget is over and leaves them for the next run, which walks the same
// stream in due_at order: unless a readback that gave no answer moves its
// task behind the others (DeferReadback), the same hung readbacks at the
// head spend every run's budget and a task behind them is never started.
// The deferred tasks keep the time their outcome became uncertain.
//
// Scaled down: one shard, Budget 2 s (work until 1.75 s), LookupTimeout
// 1 s, Concurrency 1. Two unknown tasks with a 1 h age budget whose
// readback hangs are due first; task T (1 min age budget) is due after
// them, its readback answers at once, and its deadline has passed.
// Sequence per run: H1 lookup 0–1 s (error, stays unknown), H2 lookup
// 1–1.75 s (cut, stays unknown), T not started. Three runs a period apart.
//
// Want: T final (completed from its readback, or parked) after the runs.
func TestTaskBehindHungReadbacksIsReconciledWithinOnePeriod(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setupShards(t, e, 1)
		long := func(n *ledger.NewTask) { n.MaxAge = time.Hour }
		since := map[string]time.Time{}
		for _, key := range []string{"hung-head-1", "hung-head-2"} {
			task := create(t, b, key, long)
			c := claim(t, b, task.TaskID)
			u, err := b.l.MarkUnknown(ctx, task.TaskID, c.AssignmentVersion, "unknown_outcome", "reply lost")
			if err != nil {
				t.Fatal(err)
			}
			since[u.TaskID] = u.UnknownSince()
		}
		b.clock.Advance(time.Second) // T is due after both
		tt := create(t, b, "behind-hung", func(n *ledger.NewTask) { n.MaxAge = time.Minute })
		c := claim(t, b, tt.TaskID)
		if _, err := b.l.MarkUnknown(ctx, tt.TaskID, c.AssignmentVersion, "unknown_outcome", "reply lost"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(2 * time.Minute) // past Settle for all three; T past its age budget
		h := b.handler()
		h.Provider = hungLookupBut{Provider: b.prov, answers: c.OperationID()}
		h.Budget = 2 * time.Second
		h.LookupTimeout = time.Second
		h.Concurrency = 1
		var s reconciler.Summary
		for range 3 {
			s, _ = h.Handle(ctx, nil)
			b.clock.Advance(time.Minute) // one reconciler period
		}
		if got := get(t, b, tt.TaskID); got.State == ledger.StateUnknown {
			t.Fatalf("task %s is still unknown after 3 runs, %v past its age deadline (last run: examined %d, readback errors %d, partial %v): "+
				"the hung readbacks due before it spend every run's budget and it is never started",
				tt.TaskID, b.clock.Now().Sub(time.UnixMilli(got.DeadlineMs)), s.Examined, s.ReadbackErrors, s.Partial)
		}
		for id, want := range since {
			if got := get(t, b, id); got.State != ledger.StateUnknown || !got.UnknownSince().Equal(want) {
				t.Errorf("hung task %s: %s, uncertain since %v; want unknown since %v, as marked", id, got.State, got.UnknownSince(), want)
			}
		}
	})
}
