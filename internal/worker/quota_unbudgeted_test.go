package worker_test

import (
	"context"
	"testing"

	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestUnbudgetedCallsAreChargedToTheQuota: the per-caller daily quota
// ("tokens or USD per day") must see every settled provider call of a
// generate task, budget or not — only the budget's Reserve/Settle is
// conditional on t.HasBudget(). A caller that simply leaves "budget" out
// would otherwise never be charged: its calls would use tokens and money,
// its quota item would stay at zero, and submit's quota check
// (Quotas.Check) would never refuse it. (The spend metrics — tokens and
// cost per minute on the overview — count the same calls.)
func TestUnbudgetedCallsAreChargedToTheQuota(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		quota := &spend.Quota{Unit: spend.UnitTokens, Limit: 1_000_000}
		s := withBudgets(t, b, e.DDB, quota)
		ctx := context.Background()
		task := b.create(t, "quota-unbudgeted", budgetedPrompt) // no budget member
		if task.HasBudget() {
			t.Fatal("setup: the task must have no budget")
		}
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
		if n := b.sim.SideEffects(task.TaskID); n != 1 {
			t.Fatalf("setup: provider generations %d, want 1", n)
		}
		used, err := s.Quotas.Used(ctx, task.Scope)
		if err != nil {
			t.Fatal(err)
		}
		if used != usedIn+usedOut {
			t.Fatalf("caller %q's daily quota was charged %d tokens for a completed call that used %d: a task without a budget is invisible to the per-caller quota",
				task.Scope, used, usedIn+usedOut)
		}
	})
}
