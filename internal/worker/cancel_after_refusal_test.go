package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCancelAfterADefiniteRefusalEndsCancelled: a reply in hand after a
// cancel is saved (CompleteCancelled); a definite refusal in hand is
// recorded too. When the provider (no idempotency, no readback) answered
// with a definite refusal — here 400 bad request: it did NOT act — and a
// cancel lands before the worker records it, the worker's Fail /
// ScheduleRetry is fenced, but the worker knows the provider did not act:
// it ends the task cancelled (class cancelled_while_running, "the provider
// refused the call"), conditioned on state unknown, assignment_version =
// version+1 and cancel_version = version. Dropped, the task would stay
// unknown and, with no readback, be parked unknown_outcome ("the provider
// may have acted"): the caller who cancelled a task that provably had no
// effect would get a review item for a person instead of cancelled.
func TestCancelAfterADefiniteRefusalEndsCancelled(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "cancel-refused", prompt)
		b.sim.Script(task.TaskID, simulated.BadRequest)
		b.h.Hooks = cancelAfterReply(t, b, nil)
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if n := b.sim.SideEffects(task.TaskID); n != 0 {
			t.Fatalf("setup: provider side effects %d, want 0 (a 400 refusal)", n)
		}
		b.clock.Advance(2 * time.Minute)
		b.reconcile(t, b.sim)
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateCancelled {
			t.Fatalf("cancelled while running after the provider refused the call (no side effect, the worker knew it): state %s/%s; want cancelled, not a review of an outcome that was never uncertain",
				got.State, got.ReviewReason)
		}
	})
}
