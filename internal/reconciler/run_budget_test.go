package reconciler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// hungLookup is the simulated provider whose readback never answers: each
// Lookup runs until the reconciler's LookupTimeout cuts it.
type hungLookup struct{ *simulated.Provider }

func (p hungLookup) Lookup(ctx context.Context, _ string) (contract.Result, error) {
	<-ctx.Done()
	return contract.Result{}, ctx.Err()
}

// TestRunWithHungReadbacksStaysWithinItsTimeBudget: DESIGN §7 bounds each
// run by "a time budget under its timeout"; Handler.Budget keeps the last
// eighth of it for the metrics. The walk checks the budget only between
// pages, and waits for a whole page of due tasks before it looks again, so
// a page of unknown tasks whose provider readback hangs holds the run for
// (page size / Concurrency) × LookupTimeout — at the defaults 100/8 × 10 s =
// 125 s against a 40 s budget and a 60 s function timeout. The function is
// then killed mid-run: no metrics are emitted (open reviews, live tasks and
// oldest ages go silent during the incident), and no stream after that page
// is reached in that run. Scaled down here: Budget 2 s, LookupTimeout 1 s,
// Concurrency 1, six unknown tasks.
func TestRunWithHungReadbacksStaysWithinItsTimeBudget(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		for i := range 6 {
			task := create(t, b, fmt.Sprintf("hung-readback-%d", i))
			c := claim(t, b, task.TaskID)
			if _, err := b.l.MarkUnknown(ctx, task.TaskID, c.AssignmentVersion, "unknown_outcome", "reply lost"); err != nil {
				t.Fatal(err)
			}
		}
		b.clock.Advance(time.Minute) // past Settle: all six are due for readback
		h := b.handler()
		h.Provider = hungLookup{b.prov}
		h.Budget = 2 * time.Second
		h.LookupTimeout = time.Second
		h.Concurrency = 1
		start := time.Now()
		s, _ := h.Handle(ctx, nil) // the failed lookups are counted as readback errors, not run errors
		took := time.Since(start)
		// One lookup in flight when the budget ends may finish.
		if limit := h.Budget + h.LookupTimeout; took > limit {
			t.Fatalf("run took %v with a %v budget (examined %d, readback errors %d, partial %v): the budget is not enforced within a page",
				took.Round(100*time.Millisecond), h.Budget, s.Examined, s.ReadbackErrors, s.Partial)
		}
	})
}

// notFoundWhenCut is a provider whose readback hangs and, once its context
// is cut, reports the operation as not found: what it says then is no
// evidence that the provider never acted.
type notFoundWhenCut struct{ *simulated.Provider }

func (p notFoundWhenCut) Lookup(ctx context.Context, _ string) (contract.Result, error) {
	<-ctx.Done()
	return contract.Result{}, fmt.Errorf("%w (%v)", contract.ErrNotFound, ctx.Err())
}

// TestReadbackCutByTheRunBudgetLeavesTheTaskUnknown: a lookup the end of
// the run's budget cuts is no answer, whatever it returns; a "not found"
// then would otherwise re-queue (re-send) a call the provider may have
// performed.
func TestReadbackCutByTheRunBudgetLeavesTheTaskUnknown(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "cut-readback")
		c := claim(t, b, task.TaskID)
		if _, err := b.l.MarkUnknown(ctx, task.TaskID, c.AssignmentVersion, "unknown_outcome", "reply lost"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute) // past Settle: due for readback
		h := b.handler()
		h.Provider = notFoundWhenCut{b.prov}
		h.Budget = 2 * time.Second
		h.LookupTimeout = 5 * time.Second // longer than the budget: only the budget cuts the lookup
		s, _ := h.Handle(ctx, nil)
		if s.Requeued != 0 || s.ReadbackNotFound != 0 || s.ReadbackErrors != 1 || !s.Partial {
			t.Fatalf("summary %+v: want the cut readback counted as one readback error in a partial run, nothing re-queued", s)
		}
		if got := get(t, b, task.TaskID); got.State != ledger.StateUnknown || got.AssignmentVersion != c.AssignmentVersion {
			t.Fatalf("task is %s at version %d, want unknown at %d: left for the next run's readback", got.State, got.AssignmentVersion, c.AssignmentVersion)
		}
	})
}
