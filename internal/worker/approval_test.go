package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestGatedTaskAwaitsApproval: the worker's completion of a task with an
// approval gate saves the result exactly like a completion (fenced, once)
// and lands in awaiting_approval, due at the approval deadline; a
// redelivered message changes nothing.
func TestGatedTaskAwaitsApproval(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := b.create(t, "gated", `{"prompt":"summarise"}`, func(n *ledger.NewTask) {
			n.ApprovalTTL = 48 * time.Hour
			n.Plan = `{"approval":{"expires_in_seconds":172800,"required":true},"deliver":[]}`
		})
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateAwaitingApproval)
		if got.Result == "" || got.ResultSHA256 != ledger.SHA256Hex(got.Result) || got.ApprovalState != ledger.ApprovalPending ||
			got.DueAt != b.clock.Now().Add(48*time.Hour).UnixMilli() || got.ExpiresAt != 0 || got.LeaseOwner != "" {
			t.Fatalf("gated completion: sha %s approval %s due %d expires %d lease %q", got.ResultSHA256, got.ApprovalState, got.DueAt, got.ExpiresAt, got.LeaseOwner)
		}
		// A duplicate message finds nothing to claim and writes nothing.
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		if again := b.get(t, task.TaskID); again.WriteNonce != got.WriteNonce || again.State != ledger.StateAwaitingApproval {
			t.Fatalf("a duplicate message changed the task: %s", again.State)
		}
	})
}
