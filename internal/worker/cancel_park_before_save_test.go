package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestResultInHandIsSavedOverTheCancelledTasksPark: the provider (no
// idempotency, no readback) replies; a cancel while running lands
// (CancelRunning: unknown at version+1, cancel_version = version, due at
// the old lease end); the worker is slow to save (throttling, an S3
// offload) and the reconciler runs first: with no readback it parks the
// task unknown_outcome at version+1. The worker's Complete is then fenced,
// ledger.CancelledAt is false (the task is needs_review, not unknown) and
// the park is not at the worker's own version — yet the worker holds the
// provider's one result. As for an expired lease (CompleteLapsed), it
// resolves this park too (cancel_version = version AND assignment_version
// = version+1) and the task ends completed with the result, not discarded.
func TestResultInHandIsSavedOverTheCancelledTasksPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "cancel-park-first", prompt)
		b.h.Hooks = cancelAfterReply(t, b, func(ctx context.Context, id string) {
			// The worker is slow to save; the reconciler's period passes.
			b.clock.Advance(2 * time.Minute)
			b.reconcile(t, b.sim)
			if p := b.get(t, id); p.State != ledger.StateNeedsReview || p.ReviewReason != ledger.ReviewUnknownOutcome {
				t.Errorf("setup: the reconciler should have parked the cancelled task unknown_outcome first, got %s/%s", p.State, p.ReviewReason)
			}
		})
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if n := b.sim.SideEffects(task.TaskID); n != 1 {
			t.Fatalf("provider side effects %d, want 1 (the provider acted before the cancel)", n)
		}
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateCompleted || got.Result == "" {
			t.Fatalf("the worker held the provider's one result when its save met the reconciler's park: state %s/%s, result %d bytes; want completed with that result (the park resolved, like CompleteLapsed), not discarded",
				got.State, got.ReviewReason, len(got.Result))
		}
	})
}
