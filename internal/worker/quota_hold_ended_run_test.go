package worker_test

// A crashed attempt's reservation on its caller's daily quota when the
// task's run ends by a path other than the reconciler's park or an
// operator's action (DESIGN §13), on kumo and moto.

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCancelledRequeuedTasksQuotaHoldIsSettled: a task's worker reserves
// its call's 110 tokens on the caller's 200-token day, the provider bills
// the call, and the worker dies before settling. The reconciler re-queues
// the task (a retry); its caller cancels it while it is queued. No attempt
// of it will ever settle the crashed call's reservation (only the next
// attempt did), so it must be settled when the run ends — else it is held
// as a call in flight all day and every other task of the caller that
// fits only without it waits in cycles until its age budget parks it.
func TestCancelledRequeuedTasksQuotaHoldIsSettled(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 200})
		ctx := context.Background()
		task := b.create(t, "cancel-requeued", budgetedPrompt)
		crashAfterBilledCall(t, b, task.TaskID)
		rc := settlingReconciler(b, s.Budgets)
		for i := 0; ; i++ {
			got := b.get(t, task.TaskID)
			if got.State == ledger.StateQueued || got.State == ledger.StateRetryWait {
				break
			}
			if i == 3 {
				t.Fatalf("setup: the reconciler left task %s %s, want it re-queued", task.TaskID, got.State)
			}
			b.clock.Advance(time.Minute)
			if _, err := rc.Handle(ctx, json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		// The caller's cancel, through the task API as a browser sends it.
		submit := &api.Handler{Ledger: b.l, Budgets: s.Budgets, Quotas: s.Quotas}
		path := "/tasks/" + task.TaskID + "/cancel"
		resp, err := submit.Handle(ctx, events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "$default", RawPath: path,
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: path}},
		})
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("cancel of the queued task: %d %s %v", resp.StatusCode, resp.Body, err)
		}
		// The reconciler gets its chance too.
		b.clock.Advance(time.Minute)
		if _, err := rc.Handle(ctx, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		if got := b.get(t, task.TaskID); got.State != ledger.StateCancelled {
			t.Fatalf("setup: task %s, want cancelled", got.State)
		}
		if settled, reserved := quotaDay(t, b, "anonymous"); reserved != 0 {
			t.Fatalf("task %s is cancelled and will never settle its crashed call, but the caller's day still holds %d tokens reserved by calls in flight (%d settled): the caller's other tasks wait for it all day",
				task.TaskID, reserved, settled)
		}
	})
}

// TestWorkerParkedTasksCrashedQuotaHoldIsSettled: a budgeted task's first
// attempt reserves 110 tokens on its 150-token budget and on the caller's
// 200-token day, the provider bills the call, and the worker dies. The
// next attempt settles the crashed reservation on the budget (in full)
// and is refused by it: the worker parks the task budget_exhausted —
// before it reaches the daily quota, where the crashed reservation is
// settled (settleEarlierAttempts). Nothing else settles it (the reconciler
// and an operator only settle the runs they end or act on), so it stays
// held on the caller's day as a call in flight.
func TestWorkerParkedTasksCrashedQuotaHoldIsSettled(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 200})
		ctx := context.Background()
		task := b.create(t, "worker-park-crashed", budgetedPrompt, budget(150, nil))
		crashAfterBilledCall(t, b, task.TaskID)
		// The lease lapses; the redelivered message runs the next attempt.
		b.clock.Advance(2 * time.Minute)
		rc := settlingReconciler(b, s.Budgets)
		if _, err := rc.Handle(ctx, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		for len(b.poll(t, 10, 60)) > 0 {
		}
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted {
			t.Fatalf("setup: task %s (%s, %s), want parked budget_exhausted by its next attempt", got.State, got.ReviewReason, got.ErrorClass)
		}
		if n := b.sim.Calls(task.TaskID); n != 1 {
			t.Fatalf("setup: %d provider calls, want 1", n)
		}
		if settled, reserved := quotaDay(t, b, "anonymous"); reserved != 0 {
			t.Fatalf("task %s is parked by its worker and will never settle its crashed call, but the caller's day still holds %d tokens reserved by calls in flight (%d settled)",
				task.TaskID, reserved, settled)
		}
	})
}
