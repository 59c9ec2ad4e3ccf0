package worker_test

// A crashed attempt's reservation when the attempt right after it never
// reserved (it died between its claim and its reservation), and a later
// attempt then ends the run (DESIGN §13), on kumo and moto.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCompletedRunSettlesEveryCrashedAttemptsQuotaHold: attempt 1 reserves
// its call's 110 tokens on the caller's day, the provider bills it, and
// the worker dies before settling. Attempt 2 dies right after its claim,
// before it reserves anything (a Lambda timeout reading a large input,
// say): it settles nothing and holds nothing. Attempt 3 runs and
// completes. Only "the previous attempt" (attempt 2, which held nothing)
// is settled by attempt 3, so attempt 1's 110 tokens stay on the caller's
// day as a call in flight after the run is over, all day — the very hold
// the settle-on-end fixes exist to clear, left by the run's ordinary end.
func TestCompletedRunSettlesEveryCrashedAttemptsQuotaHold(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 1000})
		ctx := context.Background()
		task := b.create(t, "skipped-attempt", budgetedPrompt, func(n *ledger.NewTask) { n.MaxAttempts = 5 })
		crashAfterBilledCall(t, b, task.TaskID)
		rc := settlingReconciler(b, s.Budgets)
		requeued := func(want int) {
			t.Helper()
			for i := 0; ; i++ {
				got := b.get(t, task.TaskID)
				if (got.State == ledger.StateQueued || got.State == ledger.StateRetryWait) && got.Attempts == want {
					return
				}
				if i == 3 {
					t.Fatalf("setup: the reconciler left task %s %s with %d attempts, want it re-queued after attempt %d", task.TaskID, got.State, got.Attempts, want)
				}
				b.clock.Advance(time.Minute)
				if _, err := rc.Handle(ctx, json.RawMessage(`{}`)); err != nil {
					t.Fatal(err)
				}
			}
		}
		requeued(1)
		if _, reserved := quotaDay(t, b, "anonymous"); reserved != 110 {
			t.Fatalf("setup: the crashed attempt holds %d tokens, want 110", reserved)
		}
		// Attempt 2 dies after its claim, before any reservation.
		for len(b.poll(t, 10, 60)) > 0 {
		}
		b.h.Hooks = &worker.Hooks{AfterClaim: func(context.Context, string) error { return errDie }}
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		b.h.Hooks = nil
		requeued(2)
		// Attempt 3 runs to completion.
		for len(b.poll(t, 10, 60)) > 0 {
		}
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateCompleted || got.Attempts != 3 {
			t.Fatalf("setup: task %s after %d attempts, want completed by attempt 3", got.State, got.Attempts)
		}
		if settled, reserved := quotaDay(t, b, "anonymous"); reserved != 0 {
			t.Fatalf("task %s is completed, but the caller's day still holds %d tokens reserved by calls in flight (%d settled): attempt 1's crashed reservation was never settled, because attempt 3 settled only attempt 2's",
				task.TaskID, reserved, settled)
		}
	})
}
