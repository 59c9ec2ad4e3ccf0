package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A cancel of a running task whose worker died long before (its lease
// lapsed, no reconciler run in between) fences a call that, if it ever
// started, ended by the lease's end plus the call timeout: a readback's
// "not found" after that is credible, so the task ends cancelled saying the
// provider did not act — not parked, past its age budget, saying the call
// may still reach the provider.
func TestCancelLongAfterTheWorkersLeaseLapsedEndsCancelled(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "cancel-after-lapse", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		claim(t, b, task.TaskID) // the worker dies here: no call, no heartbeat
		b.clock.Advance(20 * time.Minute)
		if _, err := b.l.CancelRunning(ctx, get(t, b, task.TaskID)); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(31 * time.Second)
		s := handle(t, b.handler())
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateCancelled {
			t.Fatalf("task %s (%s: %q), summary %+v; want cancelled: the readback found nothing long after the fenced lease ended",
				got.State, got.ReviewReason, got.ErrorMessage, s)
		}
	})
}
