package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestParkAfterAReleasedAttemptStillSaysAnEarlierCallMayHaveGenerated:
// DESIGN §1.6 — a review tells "what is known, what is uncertain". The
// provider honours idempotency keys and reads back (the simulated
// provider; not retry-safe). Attempt 1's call generated, its worker went
// silent, and the reconciler re-queued the expired lease recording
// unknown_outcome ("the provider may have acted"), so that a later park
// says so. Attempt 2's worker is slow: its lease expires with no attempt
// left, the reconciler moves it to unknown, and the worker, which never
// called, gives it back (ReleaseUnknown). That voids attempt 2's
// uncertainty, not attempt 1's: when the age budget then ends with the
// task queued, the budget park must not say nothing was generated.
//
// Sequence (MaxAttempts 2, MaxAge 10 min): claim v1, provider generates,
// +40 s, reconciler Requeue (unknown_outcome); worker claims v2; in its
// AfterClaim hook +40 s, reconciler ExpireToUnknown (no attempt left),
// another caller fills the model's window; the worker's admission wait is
// refused at unknown at v2 → ReleaseUnknown; +11 min,
// reconciler parks the queued task budget_exhausted.
//
// Want: the park does not say nothing was generated (an earlier attempt's
// outcome was unknown).
func TestParkAfterAReleasedAttemptStillSaysAnEarlierCallMayHaveGenerated(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e) // the simulated provider: idempotency keys and readback
		ctx := context.Background()
		task := requeuedAfterAGeneration(t, b, "release-after-requeue", func(n *ledger.NewTask) {
			n.MaxAge, n.MaxAttempts = 10*time.Minute, 2
		})
		a := withAdmission(b, t, admission.Limit{RequestsPerWindow: 1, TokensPerWindow: 10_000_000})
		var hookErr error
		b.h.Hooks = &worker.Hooks{AfterClaim: func(context.Context, string) error {
			b.clock.Advance(40 * time.Second) // the slow worker's lease ends
			s, err := b.reconcileG(b.sim)
			if err == nil && s.ExpiredToUnknown != 1 {
				err = &setupError{"reconciler did not expire attempt 2's lease to unknown"}
			}
			if err == nil {
				_, err = a.Admit(ctx, simulated.DefaultModel, 100) // another caller fills the window
			}
			hookErr = err
			return nil
		}}
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if hookErr != nil {
			t.Fatalf("setup: %v", hookErr)
		}
		if n := b.sim.Calls(task.TaskID); n != 1 {
			t.Fatalf("setup: %d provider calls, want 1 (attempt 1's)", n)
		}
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateQueued {
			t.Fatalf("setup: task %s (%s); want queued, given back by attempt 2's worker", got.State, got.ErrorClass)
		}
		b.clock.Advance(11 * time.Minute) // past the age budget
		// Readback hidden: with it, the reconciler would complete the task
		// from attempt 1's result instead of parking it (the reconciler's
		// TestRequeuedExpiredLeaseAtItsDeadlineIsDecidedByReadback).
		s := b.reconcile(t, noReadback{b.sim})
		got = b.get(t, task.TaskID)
		r, _ := b.l.GetReview(ctx, task.TaskID)
		if got.State != ledger.StateNeedsReview || r == nil {
			t.Fatalf("setup: task %s after the age budget (reconciler %+v); want parked", got.State, s)
		}
		text := r.Summary + "\n" + strings.Join(r.Known, "\n")
		if strings.Contains(text, "nothing was generated") {
			t.Fatalf("attempt 1's call generated (operation id %s) and was recorded unknown_outcome, yet the park (error %s) says:\n%s",
				task.TaskID, got.ErrorClass, text)
		}
	})
}

// noReadback is a provider whose readback is hidden: only contract.Provider's
// methods are promoted, not Lookup.
type noReadback struct{ contract.Provider }

type setupError struct{ s string }

func (e *setupError) Error() string { return e.s }
