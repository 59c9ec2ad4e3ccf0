package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestDeliveryReadBackWithoutProofOfAbsenceIsRequeuedWithItsOutcomeOpen: a
// deliver task to a destination that deduplicates by operation id but
// cannot be read back. Its worker's call reaches the destination, which
// delivers; the reply is lost and the worker records the outcome unknown
// (as it does when a 504's Retry-After reaches past the age deadline).
// With budget left, the readback's "not found" is no proof of absence
// (deliver.Step answers contract.ErrNotFound without deliver.ErrAbsent):
// sending again is harmless, so the task is re-queued, but its outcome must
// stay open, or a later budget park says the readback credibly found no
// record although the delivery happened (DESIGN §1.6).
func TestDeliveryReadBackWithoutProofOfAbsenceIsRequeuedWithItsOutcomeOpen(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task, c, h := deliveredWithLostReply(t, b, "unproven-absent-delivery", 5*time.Minute)
		deadline := time.UnixMilli(task.DeadlineMs)
		if _, err := b.l.MarkUnknown(ctx, c.TaskID, c.AssignmentVersion, "unknown_outcome", "504 Gateway Timeout; Retry-After past the age deadline",
			ledger.InAttempt(c)); err != nil {
			t.Fatal(err)
		}

		b.clock.Set(deadline.Add(-4 * time.Minute)) // past Settle, budget left
		if s := handle(t, h()); s.Requeued != 1 {
			t.Fatalf("summary = %+v, want the unknown delivery re-queued (the destination deduplicates)", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateQueued || got.OpenUnknownMs == 0 || got.ErrorClass == ledger.ErrorReadbackAbsent {
			t.Fatalf("re-queued as %s, open_unknown_ms %d, error %s (%s); want queued with the delivered attempt's outcome open",
				got.State, got.OpenUnknownMs, got.ErrorClass, got.ErrorMessage)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL) // the re-sent message is not consumed in time

		// Past the age deadline the open outcome is read back again; the
		// review must not say nothing was delivered.
		for i := 0; i < 3 && got.State != ledger.StateNeedsReview; i++ {
			b.clock.Set(deadline.Add(time.Duration(i+1) * time.Minute))
			handle(t, h())
			got = get(t, b, task.TaskID)
		}
		if got.State != ledger.StateNeedsReview {
			t.Fatalf("task %s past its age deadline, want needs_review", got.State)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		all := r.Summary + "\n" + strings.Join(r.Known, "\n") + "\n" + strings.Join(r.Uncertain, "\n")
		if r.Reason != ledger.ReviewUnknownOutcome || strings.Contains(all, "nothing was generated") || strings.Contains(all, "credibly found no record") {
			t.Fatalf("the destination delivered (1 side effect) and cannot be read back, but the review (%s) says:\n%s", r.Reason, all)
		}
	})
}
