package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Adversarial review of issue 12 (attack12).

// TestAttack12ApproveAfterTheApprovalDeadline: the approval deadline
// (approval_deadline_ms) is the end of the approval window (DESIGN §10:
// "approval deadline passes → reconciler parks it approval_expired"). An
// approval that arrives after the deadline but before the reconciler's next
// walk must not create deliveries: today Approve is conditioned only on the
// state, so an expired approval window still delivers (the reconciler's
// park then loses the race and is counted "raced").
func TestAttack12ApproveAfterTheApprovalDeadline(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "late-approval")
		if task.ApprovalDeadlineMs != b.clock.Now().Add(time.Hour).UnixMilli() {
			t.Fatalf("approval deadline %d, want now+1h", task.ApprovalDeadlineMs)
		}
		b.clock.Advance(time.Hour + time.Minute) // the window is over; no reconciler walk yet

		got, _, err := b.l.Approve(ctx, task, approveReq(task, task.ResultSHA256, "", 2))
		ds := deliveriesOf(t, b, task, task.ResultSHA256, 2, 0)
		if err == nil || len(ds) != 0 {
			state := ledger.State("")
			if got != nil {
				state = got.State
			}
			t.Fatalf("approval 1m after the approval deadline = state %q, err %v, %d deliveries created; want refused (expired) and none", state, err, len(ds))
		}
	})
}
