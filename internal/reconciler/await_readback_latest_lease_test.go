package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestNotFoundWithinALaterOpenAttemptsCallWindowIsNoProofNothingWasGenerated: two attempts of a
// deduplicating provider's task expire and are re-queued; the open
// uncertainty dates from the first lease's end, but the second attempt's
// call may run until its own lease's end plus the call timeout. Read back
// past the first window and within the second, while that call is in
// flight, "not found" proves nothing: the review must not say nothing was
// generated (DESIGN §1.4, §1.6).
func TestNotFoundWithinALaterOpenAttemptsCallWindowIsNoProofNothingWasGenerated(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{LongDelay: 4 * time.Second, CallTimeout: time.Minute})
		task := create(t, b, "await-readback-latest-lease", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)

		b.clock.Set(deadline.Add(-3 * time.Minute))
		claim(t, b, task.TaskID) // lease until deadline - 2m30s
		b.clock.Set(deadline.Add(-2*time.Minute - 20*time.Second))
		if s := handle(t, b.handler()); s.Requeued != 1 {
			t.Fatalf("summary = %+v, want the first expired lease re-queued", s)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL)

		b.clock.Set(deadline.Add(-time.Minute))
		claim(t, b, task.TaskID) // lease until deadline - 30s
		b.clock.Set(deadline.Add(-20 * time.Second))
		if s := handle(t, b.handler()); s.Requeued != 1 {
			t.Fatalf("summary = %+v, want the second expired lease re-queued", s)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL)

		done := startLongCall(t, b, task)          // the second worker's call, still running
		b.clock.Set(deadline.Add(5 * time.Second)) // 95 s after the first lease's end, 35 s after the second's
		wantParkedWithoutFalseCertainty(t, b, task, done)
	})
}
