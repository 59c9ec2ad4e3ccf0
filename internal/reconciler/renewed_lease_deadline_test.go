package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRenewedLeaseBeforeTheDeadlineIsFinalWithinOnePeriod: DESIGN §1.1 —
// every task final within its age budget plus one reconciler period. A
// Bedrock-like provider (no idempotency, no readback). The worker's whole
// life is inside the age budget: it claims 12 s before the deadline (lease
// 30 s), marks its call, its heartbeat renews once (lease/3 later, 2 s
// before the deadline) and then it vanishes. Its lease ends 28 s after the
// deadline, so the reconciler running every minute must find it (lease +
// Grace past) and park it at the first run at or after deadline + 60 s.
//
// Renew rounds due_at up to the next multiple of the lease at or after the
// lease end (runningDue), up to 30 s later than the lease end, and the
// walk only returns running tasks whose due_at is Grace past; the clock is
// aligned so the rounding is at its largest, and a renewal with the age
// deadline must keep the rounded due_at at or before it so the run at
// deadline + 60 s still finds the task.
func TestRenewedLeaseBeforeTheDeadlineIsFinalWithinOnePeriod(t *testing.T) {
	t.Parallel()
	const (
		period = time.Minute
		lease  = 30 * time.Second
		maxAge = 10 * time.Minute
	)
	for _, phase := range []time.Duration{0, time.Second} {
		t.Run(phase.String(), func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
				// Align the clock so the renewed lease ends 1 ms past a
				// multiple of the lease (any task has some phase on that grid).
				now := b.clock.Now().UnixMilli()
				c := (now/30_000+1)*30_000 + 1 - 28_000 - maxAge.Milliseconds()%30_000
				for c < now {
					c += 30_000
				}
				b.clock.Set(time.UnixMilli(c))
				task := create(t, b, "renewed-due-"+phase.String(), func(n *ledger.NewTask) { n.MaxAge = maxAge })
				deadline := time.UnixMilli(task.DeadlineMs)
				if (task.DeadlineMs+28_000)%30_000 != 1 {
					t.Fatalf("alignment: deadline %d", task.DeadlineMs)
				}
				b.clock.Set(deadline.Add(-12 * time.Second))
				claimed := claim(t, b, task.TaskID)
				markCall(t, b, claimed)
				b.clock.Set(deadline.Add(-2 * time.Second)) // the heartbeat's first beat
				// As the worker's heartbeat renews: with the task's age
				// deadline (the rounding is kept at or before it).
				r, err := b.l.Renew(ctx, task.TaskID, claimed.AssignmentVersion, lease, ledger.WithAgeDeadline(task.DeadlineMs))
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("renewed: lease_until = deadline%+ds, due_at = deadline%+.3fs", (r.LeaseUntil-task.DeadlineMs)/1000, float64(r.DueAt-task.DeadlineMs)/1000)
				// …and the worker vanishes. Runs at deadline+phase, +period, …
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
					t.Fatalf("at deadline+%s (first run at or after deadline+%s) the task is still %s (lease_until deadline%+.3fs, due_at deadline%+.3fs); the worker's last renewal was before the deadline, the promise is final within the age budget plus one reconciler period",
						at.Sub(deadline), period, got.State, float64(got.LeaseUntil-task.DeadlineMs)/1000, float64(got.DueAt-task.DeadlineMs)/1000)
				}
				if got.ReviewReason != ledger.ReviewUnknownOutcome {
					t.Fatalf("parked %s, want %s", got.ReviewReason, ledger.ReviewUnknownOutcome)
				}
			})
		})
	}
}
