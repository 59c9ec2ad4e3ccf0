package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A deduplicating provider's calls are never marked, so the call of a
// running task whose lease expired may still be in flight (its worker's
// renewals failing) until the lease's end plus the call timeout. Past the
// age budget the reconciler parks such a task at once, and a readback's
// "not found" then proves nothing: the review must say that the readback
// found no record and until when the fenced call could still reach the
// provider, not that nothing was generated.
func TestExpiredLeasePastDeadlineWithAnUnmarkedCallInFlightIsParkedSayingUntilWhen(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{CallTimeout: time.Minute})
		task := create(t, b, "expired-inflight-deadline", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)
		b.clock.Set(deadline.Add(-time.Second))
		leaseEnd := time.UnixMilli(claim(t, b, task.TaskID).LeaseUntil)
		// Past the age deadline and the lease, within the call timeout.
		b.clock.Set(leaseEnd.Add(10 * time.Second))
		s := handle(t, b.handler())
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted || s.ReadbackInFlight != 1 {
			t.Fatalf("past the age deadline with an unmarked call possibly in flight: task %s %q, summary %+v; want parked budget_exhausted after one in-flight readback",
				got.State, got.ReviewReason, s)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		known := strings.Join(r.Known, "\n")
		until := leaseEnd.Add(time.Minute).UTC().Format(time.RFC3339)
		if !strings.Contains(known, "readback of operation id "+task.OperationID()+" found no record") || !strings.Contains(known, "until "+until) {
			t.Fatalf("review known facts do not say the readback found nothing while the fenced call could run until %s:\n%s", until, known)
		}
		if strings.Contains(known, "nothing was generated") || !strings.Contains(r.Summary, "may have reached the provider") {
			t.Fatalf("the fenced call may still reach the provider, yet the review says otherwise: %q\n%s", r.Summary, known)
		}
	})
}
