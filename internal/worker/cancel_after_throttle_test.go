package worker_test

import (
	"context"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestAttackReviewITransientRefusalAfterCancelIsParkedAsMayHaveActed
// (adversarial review i; sibling of b458a38's refusal-after-lapse, a gap
// older than it): a cancel while running lands after the provider refused
// the call. For a 400 the worker knows the provider did not act and ends
// the task cancelled (cancelledRefusal, for Fail only). For a 429 — as
// definite a refusal; b458a38 settles it from unknown and from the
// unknown_outcome park for the same reason — ScheduleRetry is fenced by
// the cancel (v+1), the worker acknowledges "fenced", and the reconciler,
// finding the call marked at the cancelled version and no readback, parks
// it unknown_outcome: "whether the provider performed (and billed)" is
// uncertain, a started call is known. The caller asked to stop, nothing
// acted, the worker knew; DESIGN §1.6 and the cancel contract ("ends
// cancelled once it is known that the provider did not act").
func TestAttackReviewITransientRefusalAfterCancelIsParkedAsMayHaveActed(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "i-cancel-429", prompt)
		b.sim.Script(task.TaskID, simulated.Throttle)
		raced := raceTheSave(t, b, task.TaskID, "cancel")
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 120))
		raced()
		if n := b.sim.SideEffects(task.TaskID); n != 0 {
			t.Fatalf("setup: %d side effects; the provider refused the call", n)
		}
		wantEndedCancelled(t, b, task.TaskID, "cancelled after the provider refused the call (429: it did not act)")
	})
}
