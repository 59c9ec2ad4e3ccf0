package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestAttack14bCancelledGatedTaskAwaitsApproval (adversarial review of
// issue 14, round 2): a task with an approval gate (and a delivery plan)
// (required approval) is cancelled while running after the provider replied; the cancel was
// answered 202 cancel_requested. CompleteCancelled saves the reply — and,
// because the task is gated, puts it in awaiting_approval with a pending
// approval and a deadline. An approver can now approve it and create its
// deliveries: the caller's cancel is ignored for every effect step that
// had not started yet (a destination call started after the cancel).
// Keeping the generation's result is right (the provider acted and billed);
// opening the gate is not. Smallest fix: CompleteCancelled on a gated task
// saves the result but ends completed with the approval closed (e.g.
// approval_state withdrawn/cancelled, no due_at), so no delivery can ever
// be created for a cancelled request.
func TestAttack14bCancelledGatedTaskAwaitsApproval(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "atk14b-cancel-gated", prompt, func(n *ledger.NewTask) {
			n.ApprovalTTL = 48 * time.Hour
			n.Plan = `{"approval":{"expires_in_seconds":172800,"required":true},"deliver":[]}`
		})
		b.h.Hooks = &worker.Hooks{AfterProvider: func(ctx context.Context, id string) error {
			cur, err := b.l.Get(ctx, id)
			if err != nil {
				return err
			}
			if _, err := b.l.CancelRunning(ctx, cur); err != nil {
				t.Errorf("cancel after the provider replied: %v", err)
			}
			return nil
		}}
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		got := b.get(t, task.TaskID)
		if got.Result == "" {
			t.Fatalf("the reply in hand was not saved: state %s", got.State)
		}
		if got.State == ledger.StateAwaitingApproval || got.ApprovalState == ledger.ApprovalPending {
			t.Fatalf("a task cancelled while running (202 cancel_requested) now awaits approval (state %s, approval %s, error_class %s): approving it would start its deliveries after the caller's cancel",
				got.State, got.ApprovalState, got.ErrorClass)
		}
	})
}
