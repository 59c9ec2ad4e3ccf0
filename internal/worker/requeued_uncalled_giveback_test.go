package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestARequeuedLapseWithNoCallIsGivenBackWithoutItsUncertainty: a provider
// that deduplicates is called without a call-start mark, so when a
// worker's lease lapses the reconciler cannot tell whether its call
// started: it re-queues the task with the attempt counted and its outcome
// open (a later budget park would read it back, or say the provider may
// have acted). Here the worker stopped after its claim (a GC pause, a slow
// read) and, going on, finds its renewal refused before any call. Only it
// knows that no call was made: it gives the attempt back and voids what
// the lapse recorded — the open outcome, the history entry and the
// unknown_outcome error — so that no review can later claim a call that
// never started, and the stall costs no attempt.
func TestARequeuedLapseWithNoCallIsGivenBackWithoutItsUncertainty(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{})) // deduplicates, reads back
		task := b.create(t, "stalled-claim-requeued", prompt, func(n *ledger.NewTask) { n.MaxAttempts = 3 })

		var (
			requeued reconciler.Summary
			recErr   error
		)
		b.h.Hooks = &worker.Hooks{AfterClaim: func(context.Context, string) error {
			b.clock.Advance(40 * time.Second) // past the 30 s lease and its grace
			requeued, recErr = b.reconcileG(b.sim)
			return nil
		}}

		b.send(t, task.TaskID)
		handle(t, b.h, context.Background(), b.deliver(t, 1, 120))

		if recErr != nil || requeued.Requeued != 1 {
			t.Fatalf("setup: the reconciler did not re-queue the expired lease (err %v; run %+v)", recErr, requeued)
		}
		if calls := b.sim.Calls(task.TaskID); calls != 0 {
			t.Fatalf("setup: the provider was called %d time(s) after the lease lapsed", calls)
		}
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateQueued || got.AssignmentVersion != 1 {
			t.Fatalf("task %s at version %d, want queued at the lapsed assignment's version 1", got.State, got.AssignmentVersion)
		}
		if got.Attempts != 0 {
			t.Errorf("attempts = %d, want 0: the stalled attempt made no call and is given back", got.Attempts)
		}
		if since, open := got.OpenUncertainty(); open {
			t.Errorf("the task keeps an open outcome since %s (error %s: %q), though no call of it ever started", since, got.ErrorClass, got.ErrorMessage)
		}
		if got.ErrorClass != ledger.ErrorCallNotStarted {
			t.Errorf("error class %q, want %q", got.ErrorClass, ledger.ErrorCallNotStarted)
		}
		for _, a := range got.History() {
			if a.Outcome == ledger.OutcomeUnknown {
				t.Errorf("history keeps attempt %d as unknown (ended %d) though it made no call", a.Attempt, a.EndedMs)
			}
		}
	})
}
