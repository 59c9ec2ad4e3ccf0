package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestLeaseExpiredLongAgoIsDecidedByItsReadback: with a provider that
// deduplicates and reads back (the default simulated one), a worker claims
// and vanishes before calling; the reconciler first sees the task long
// after its lease ended and its age budget with it (a reconciler outage).
// The task is moved to unknown and read back at once. A call of that
// attempt would have ended by the lease's end plus the call timeout — the
// outcome is uncertain since the lease's end, not since the move — so the
// readback's "not found" is credible and the park says nothing was
// generated, not that the provider may have acted.
func TestLeaseExpiredLongAgoIsDecidedByItsReadback(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "expired-long-ago", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		c := claim(t, b, task.TaskID)
		b.clock.Set(time.UnixMilli(c.LeaseUntil).Add(30 * time.Minute))
		s := handle(t, b.handler())
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted {
			t.Fatalf("task %s (%s; run %+v); want parked budget_exhausted", got.State, got.ReviewReason, s)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		claims := r.Summary + "\n" + strings.Join(r.Uncertain, "\n")
		if !strings.Contains(r.Summary, "nothing was generated") || strings.Contains(claims, "may have") {
			t.Fatalf("the lease ended 30 min ago and the readback found nothing; the review says:\n%s", claims)
		}
	})
}
