package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A deduplicating provider's first attempt expires and is re-queued with
// its outcome open; the second attempt fails with a retryable class, so the
// task's error is that failure's, not the lapsed lease's. Past the age
// deadline the relay reads the provider back (AwaitReadback) while the
// first attempt's call may still run (its lease's end plus the call
// timeout): "not found" proves nothing, and the review must not say
// nothing was generated (DESIGN §1.4, §1.6).
func TestNotFoundWhileAnEarlierOpenAttemptsCallMayRunIsNoProofAfterALaterRetryableFailure(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{LongDelay: 4 * time.Second, CallTimeout: time.Minute})
		task := create(t, b, "await-readback-after-retry", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)

		b.clock.Set(deadline.Add(-80 * time.Second))
		claim(t, b, task.TaskID) // lease until deadline - 50 s
		b.clock.Set(deadline.Add(-40 * time.Second))
		if s := handle(t, b.handler()); s.Requeued != 1 {
			t.Fatalf("summary = %+v, want the expired lease re-queued", s)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL)

		b.clock.Set(deadline.Add(-38 * time.Second))
		c2 := claim(t, b, task.TaskID)
		b.clock.Set(deadline.Add(-36 * time.Second))
		if _, err := b.l.ScheduleRetry(ctx, task.TaskID, c2.AssignmentVersion, deadline.Add(-30*time.Second), "throttled", "provider throttled", ledger.InAttempt(c2)); err != nil {
			t.Fatal(err)
		}

		done := startLongCall(t, b, task)      // the first worker's call, still running
		b.clock.Set(deadline.Add(time.Second)) // 51 s after the first lease's end: within the call timeout
		wantParkedWithoutFalseCertainty(t, b, task, done)
	})
}
