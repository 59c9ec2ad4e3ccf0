package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCancelAfterTheReplyKeepsTheResultInHand: the provider (no
// idempotency, no readback) returns its result to the worker; a cancel
// (ledger.CancelRunning, as POST /tasks/{id}/cancel) lands between the
// reply and the worker's completion. CancelRunning bumps the assignment
// version, so a plain completion is fenced; the reconciler could not read
// the result back and would park the task unknown_outcome, and the one
// result the provider acted and billed for would be lost (an operator could
// only re-run it: a second effect and a second bill). DESIGN §13 says the
// outcome follows the unknown rules, under which a late result of the
// fenced attempt is saved: a completion fenced by a cancel of the worker's
// own assignment (task unknown, cancel_version = the worker's version,
// assignment_version = version+1) completes from that state, like the
// readback path does in TestCancelAfterTheProviderActed.
func TestCancelAfterTheReplyKeepsTheResultInHand(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "cancel-in-hand", prompt)
		b.h.Hooks = cancelAfterReply(t, b, nil)
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if n := b.sim.SideEffects(task.TaskID); n != 1 {
			t.Fatalf("provider side effects %d, want 1 (the provider acted before the cancel)", n)
		}
		b.clock.Advance(2 * time.Minute)
		b.reconcile(t, b.sim)
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateCompleted || got.Result == "" {
			t.Fatalf("the provider produced a result the worker held, then a cancel: state %s, result %d bytes; want completed with that result (not lost)",
				got.State, len(got.Result))
		}
	})
}
