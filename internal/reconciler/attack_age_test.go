package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestAttackExpiredLeaseAtTheAgeDeadlineIsFinalWithinOnePeriod: DESIGN §1.1
// promises every task final "within its age budget plus one reconciler
// period". A Bedrock-like provider (no idempotency, no readback); the last
// claim is made one second before the age deadline by a worker that then
// vanishes (lease 30 s). The reconciler runs every minute; whatever the
// phase of its schedule, the task must be final at the first run at or
// after deadline + 60 s. Today an expired lease past the deadline still
// goes running → unknown in one run and waits Settle before the next run
// parks it, so the task is final only two or three periods after the
// deadline.
func TestAttackExpiredLeaseAtTheAgeDeadlineIsFinalWithinOnePeriod(t *testing.T) {
	const period = time.Minute
	for _, phase := range []time.Duration{10 * time.Second, 40 * time.Second} {
		t.Run(phase.String(), func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
				task := create(t, b, "deadline-"+phase.String(), func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
				deadline := time.UnixMilli(task.DeadlineMs)
				b.clock.Set(deadline.Add(-time.Second))
				claim(t, b, task.TaskID) // the worker vanishes after this claim
				// Reconciler runs at deadline+phase, +phase+period, ...
				// until the first run at or after deadline+period.
				at := deadline.Add(phase)
				var got *ledger.Task
				for {
					b.clock.Set(at)
					handle(t, b.handler())
					got = get(t, b, task.TaskID)
					if !got.State.Live() || !at.Before(deadline.Add(period)) {
						break
					}
					at = at.Add(period)
				}
				if got.State.Live() {
					t.Fatalf("at deadline+%s (first run at or after deadline+%s) the task is still %s; the promise is final within the age budget plus one reconciler period",
						at.Sub(deadline), period, got.State)
				}
			})
		})
	}
}
