package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestReconcilerLeavesTheCancelWindowToTheFencedWorker: a cancel while
// running lands after the provider answered, past the task's age deadline,
// and right then a reconciler pass looks at the task. CancelRunning makes
// the task "due when the fenced lease would have ended (by then the worker
// has found itself fenced)": the window in which the fenced worker, which
// knows what the provider answered, decides the task (worker/cancelled.go):
// a definite refusal (400: the provider did not act) ends it cancelled
// (cancelledRefusal); a reply to a gated task ends it cancelled without the
// result (cancelFenced); a reply to an ungated task is saved
// (CompleteCancelled, or CompleteLapsed at version+1 after a park). Both
// the scheduled walk (its by_state query only returns unknown tasks due
// Settle ago) and HandleTask (which leaves a task alone unless the rule of
// its state finds it due, "an unknown task Settle old", even once the age
// budget is over) honour the window, so every case ends as the worker
// decided — not parked unknown_outcome ("the provider may have acted") with
// a review whose only remedy is another call.
// Provider: no idempotency, no readback (the project standard).
func TestReconcilerLeavesTheCancelWindowToTheFencedWorker(t *testing.T) {
	t.Parallel()
	for _, a := range []struct {
		name      string
		refused   bool // the provider refused the call (400): no side effect
		gated     bool // an approval gate: a reply in hand ends it cancelled, without the result
		wantState ledger.State
	}{
		{"refused", true, false, ledger.StateCancelled},
		{"gated reply", false, true, ledger.StateCancelled},
		{"reply", false, false, ledger.StateCompleted},
	} {
		t.Run(a.name, func(t *testing.T) { preemptCancelWindow(t, a.refused, a.gated, a.wantState) })
	}
}

func preemptCancelWindow(t *testing.T, refused, gated bool, wantState ledger.State) {
	for _, c := range []struct {
		name string
		pass func(*reconciler.Handler, string) (reconciler.Summary, error)
	}{
		{"scheduled walk", func(h *reconciler.Handler, _ string) (reconciler.Summary, error) {
			return h.Handle(context.Background(), json.RawMessage(`{}`))
		}},
		{"HandleTask", func(h *reconciler.Handler, id string) (reconciler.Summary, error) {
			return h.HandleTask(context.Background(), id)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
				ctx := context.Background()
				task := b.create(t, "cancel-window-"+c.name, prompt, func(n *ledger.NewTask) {
					n.MaxAge = 10 * time.Second
					if gated {
						n.ApprovalTTL = 48 * time.Hour
						n.Plan = `{"approval":{"expires_in_seconds":172800,"required":true},"deliver":[]}`
					}
				})
				wantEffects := 1
				if refused {
					b.sim.Script(task.TaskID, simulated.BadRequest)
					wantEffects = 0
				}
				rc := &reconciler.Handler{
					Ledger:   b.l,
					Dispatch: &dispatch.Sender{SQS: b.e.SQS, QueueURL: b.e.Names.TaskQueueURL},
					Provider: b.sim,
					Log:      logging.Discard(),
				}
				var pass reconciler.Summary
				b.h.Hooks = cancelAfterReply(t, b, func(ctx context.Context, id string) {
					b.clock.Advance(11 * time.Second) // past the age deadline; the fenced lease (30 s) still runs
					if got := b.get(t, id); got.State != ledger.StateUnknown || got.DueAt <= b.clock.Now().UnixMilli() {
						t.Fatalf("setup: after the cancel %s due_at %d (now %d); want unknown, due in the future", got.State, got.DueAt, b.clock.Now().UnixMilli())
					}
					var err error
					if pass, err = c.pass(rc, id); err != nil {
						t.Errorf("reconciler pass: %v", err)
					}
				})
				b.send(t, task.TaskID)
				handle(t, b.h, ctx, b.deliver(t, 1, 60))
				if n := b.sim.SideEffects(task.TaskID); n != wantEffects {
					t.Fatalf("setup: provider side effects %d, want %d", n, wantEffects)
				}
				got := b.get(t, task.TaskID)
				if got.State != wantState {
					t.Fatalf("%s right after the cancel (summary: parked %d, cancelled %d, raced %d): task %s/%s; want %s — what the fenced worker knew decides the task, and it was not due until its fenced lease ended",
						c.name, pass.Parked, pass.Cancelled, pass.Raced, got.State, got.ReviewReason, wantState)
				}
			})
		})
	}
}
