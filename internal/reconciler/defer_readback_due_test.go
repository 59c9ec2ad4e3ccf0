package reconciler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// cutOnceLookup is a provider whose first readback hangs until the run's
// work budget cuts it, and whose later readbacks are the simulated
// provider's. When the cut comes it moves the ledger clock on by elapsed:
// in production the cut is at the end of the run's work budget, so the
// ledger clock then reads the run's start plus about seven eighths of
// DefaultBudget, while the test's budget is wall-clock and its clock fake.
type cutOnceLookup struct {
	*simulated.Provider
	clock   *testenv.Clock
	elapsed time.Duration
	hung    *atomic.Bool
}

func (p cutOnceLookup) Lookup(ctx context.Context, op string) (contract.Result, error) {
	if p.hung.CompareAndSwap(false, true) {
		<-ctx.Done()
		p.clock.Advance(p.elapsed)
		return contract.Result{}, ctx.Err()
	}
	return p.Provider.Lookup(ctx, op)
}

// TestReadbackCutNearItsDeadlineIsResolvedWithinOnePeriod: DESIGN §1.1 —
// every task ends final "within its age budget plus one reconciler
// period". A readback the run's budget cuts is cut at the end of the run's
// work, about 35 s after the run started at the defaults (Budget 40 s, an
// eighth kept for metrics). The walk finds an unknown task only once its
// due_at is Settle (30 s) old. If the task that gave no answer is due
// again from the time of the cut, the next run a period (1 min) after the
// first does not find it (its due_at is only 25 s old), and a task whose
// age budget ended just after the first run started is not reached until
// two periods after that: past its age budget plus one period.
//
// Sequence: task T unknown (its call generated, the reply was lost), age
// budget 5 min; run 1 starts 5 s before T's age deadline, T's readback
// hangs and is cut (the ledger clock then reads run start + 35 s); run 2
// starts one minute after run 1, 55 s after the deadline; T's readback
// now finds the result.
//
// Want: T final after run 2, the only run within one period of its
// deadline.
func TestReadbackCutNearItsDeadlineIsResolvedWithinOnePeriod(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setupShards(t, e, 1)
		task := unknownTask(t, b, "cut-near-deadline", true, func(n *ledger.NewTask) { n.MaxAge = 5 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs).UTC()
		run1 := deadline.Add(-5 * time.Second) // Settle long past since it became unknown
		b.clock.Set(run1)

		h := b.handler()
		h.Provider = cutOnceLookup{Provider: b.prov, clock: b.clock, elapsed: reconciler.DefaultBudget * 7 / 8, hung: &atomic.Bool{}}
		h.Budget = 2 * time.Second // wall-clock: the cut comes after 1.75 s
		s1, _ := h.Handle(ctx, nil)
		if got := get(t, b, task.TaskID); got.State != ledger.StateUnknown {
			t.Fatalf("setup: after run 1 (%+v) the task is %s; want unknown, its readback cut", s1, got.State)
		}

		b.clock.Set(run1.Add(time.Minute)) // the next scheduled run
		h.Budget = 0
		s2 := handle(t, h)
		got := get(t, b, task.TaskID)
		if got.State == ledger.StateUnknown {
			t.Fatalf("task %s is still unknown %v after its age deadline, after the only run within one period of it (examined %d): "+
				"its due_at %v (run 1 started %v) is not Settle old for that run, so the walk does not find it",
				task.TaskID, b.clock.Now().Sub(deadline), s2.Examined, time.UnixMilli(got.DueAt).UTC(), run1)
		}
	})
}
