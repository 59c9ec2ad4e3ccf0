package reconciler_test

import (
	"strings"
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
		s := handle(t, b.handler())
		if err := <-done; err != nil {
			t.Fatalf("the in-flight call failed: %v", err)
		}
		got := get(t, b, task.TaskID)
		r, err := b.l.GetReview(ctx, task.TaskID)
		if got.State != ledger.StateNeedsReview || err != nil {
			t.Fatalf("task %s (run %+v; review %v), want parked", got.State, s, err)
		}
		text := r.Summary + "\n" + strings.Join(r.Known, "\n")
		if strings.Contains(text, "nothing was generated") {
			t.Fatalf("the provider generated in a call in flight when the reconciler read back, yet the review (%s, run %+v) says nothing was generated:\n%s",
				r.Reason, s, text)
		}
	})
}
