package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestAttack14bCancelAfterADefiniteRefusalParks (adversarial review of
// issue 14, round 2): the round-1 fix saves a reply in hand after a
// cancel (CompleteCancelled), but only a successful one. When the provider
// (no idempotency, no readback) answered with a definite refusal — 400
// bad request, 503, 429: it did NOT act — and a cancel lands before the
// worker records it, the worker's Fail / ScheduleRetry is fenced and
// dropped. The task stays unknown (cancel_requested) and, with no
// readback, the reconciler parks it unknown_outcome: "the provider may
// have acted", which the worker knew to be false. The caller asked to
// cancel a task that provably had no effect and gets a review item for a
// person instead of cancelled. Smallest fix: beside cancelledInHand, a
// fenced Fail/ScheduleRetry whose refusal is ledger.CancelledAt(fe,
// version) ends the task with CancelUnknown-like semantics conditioned on
// the same three attributes (state unknown, assignment_version =
// version+1, cancel_version = version): cancelled, class
// cancelled_while_running, "the provider refused the call".
func TestAttack14bCancelAfterADefiniteRefusalParks(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "atk14b-cancel-refused", prompt)
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
