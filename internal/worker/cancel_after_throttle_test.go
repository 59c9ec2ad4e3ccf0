package worker_test

import (
	"context"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestThrottleRefusalThenCancelEndsCancelled: a cancel while running lands
// after the provider refused the call. For a 400 the worker knows the
// provider did not act and ends the task cancelled (cancelledRefusal). A
// 429 is as definite a refusal (it settles an assignment from unknown and
// from the unknown_outcome park for the same reason), so a ScheduleRetry
// fenced by the cancel (v+1) ends the task cancelled as well — rather than
// being acknowledged "fenced" and left to the reconciler, which, finding
// the call marked at the cancelled version and no readback, would park it
// unknown_outcome with "whether the provider performed (and billed)"
// uncertain and a started call known. The caller asked to stop, nothing
// acted, the worker knew; DESIGN §1.6 and the cancel contract ("ends
// cancelled once it is known that the provider did not act").
func TestThrottleRefusalThenCancelEndsCancelled(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "cancel-429", prompt)
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
