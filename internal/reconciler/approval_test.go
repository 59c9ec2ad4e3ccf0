package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestApprovalDeadlineParks: a task awaiting approval is left alone until
// its approval deadline (even past its generation age budget), then parked
// approval_expired with a review item saying nothing was delivered; a
// decided task is never parked.
func TestApprovalDeadlineParks(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		h := b.handler()
		gate := func(n *ledger.NewTask) {
			n.ApprovalTTL = 3 * time.Hour
			n.Plan = `{"approval":{"expires_in_seconds":10800,"required":true},"deliver":[]}`
		}
		awaiting := func(key string) *ledger.Task {
			c := claim(t, b, create(t, b, key, gate).TaskID)
			got, err := b.l.Complete(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"text":"r"}`, ApprovalTTL: c.ApprovalTTL()})
			if err != nil || got.State != ledger.StateAwaitingApproval {
				t.Fatalf("complete %s = %v, %v", key, got, err)
			}
			return got
		}
		waiting, decided := awaiting("expires"), awaiting("decided")
		if _, _, err := b.l.Reject(ctx, decided, "jwt:bob", "", ""); err != nil {
			t.Fatal(err)
		}
		// Past the one-hour age budget, before the approval deadline.
		b.clock.Advance(2 * time.Hour)
		handle(t, h)
		if got := get(t, b, waiting.TaskID); got.State != ledger.StateAwaitingApproval {
			t.Fatalf("before its deadline the task is %s", got.State)
		}
		b.clock.Advance(time.Hour + time.Second)
		s := handle(t, h)
		got := get(t, b, waiting.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewApprovalExpired || s.Parked != 1 || got.StateShard != "" {
			t.Fatalf("after the deadline: state %s reason %s parked %d", got.State, got.ReviewReason, s.Parked)
		}
		r, err := b.l.GetReview(ctx, waiting.TaskID)
		if err != nil || r.Reason != ledger.ReviewApprovalExpired || r.ReviewStatus != ledger.ReviewOpen || len(r.SafeActions) == 0 || len(r.Known) < 3 {
			t.Fatalf("review item = %+v, %v", r, err)
		}
		if got := get(t, b, decided.TaskID); got.State != ledger.StateRejected {
			t.Fatalf("the rejected task became %s", got.State)
		}
	})
}
