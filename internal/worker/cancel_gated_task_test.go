package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCancelledGatedTaskEndsCancelledWithoutItsResult: a task with an
// approval gate (and a delivery plan) is cancelled while running after the
// provider replied; the cancel was answered 202 cancel_requested. Saving
// the reply would put a gated task in awaiting_approval with a pending
// approval and a deadline, and an approver could then approve it and
// create its deliveries: the caller's cancel would be ignored for every
// effect step that had not started yet. There is no state that keeps the
// result with the approval closed (completed means approved), so a gated
// task ends cancelled without the result: nothing has used it yet, and no
// delivery can follow the cancel.
func TestCancelledGatedTaskEndsCancelledWithoutItsResult(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "cancel-gated", prompt, func(n *ledger.NewTask) {
			n.ApprovalTTL = 48 * time.Hour
			n.Plan = `{"approval":{"expires_in_seconds":172800,"required":true},"deliver":[]}`
		})
		b.h.Hooks = cancelAfterReply(t, b, nil)
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		got := b.get(t, task.TaskID)
		// A gated task ends cancelled without the result
		// (nothing has used it; no approval can follow the cancel).
		if got.State != ledger.StateCancelled || got.HasResult() || got.ErrorClass != ledger.ErrorCancelledWhileRunning {
			t.Fatalf("a gated task cancelled after the reply: state %s, result %v, class %s; want cancelled, no result, cancelled_while_running",
				got.State, got.HasResult(), got.ErrorClass)
		}
		if got.State == ledger.StateAwaitingApproval || got.ApprovalState == ledger.ApprovalPending {
			t.Fatalf("a task cancelled while running (202 cancel_requested) now awaits approval (state %s, approval %s, error_class %s): approving it would start its deliveries after the caller's cancel",
				got.State, got.ApprovalState, got.ErrorClass)
		}
	})
}
