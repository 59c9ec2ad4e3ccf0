package worker_test

import (
	"context"
	"testing"

	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestAttack14bUnbudgetedCallsEscapeTheQuota (adversarial review of issue
// 14, round 2): the per-caller daily quota (issue 14: "tokens or USD per
// day") is charged only in settle, and settle returns at once when the
// attempt made no budget reservation — i.e. for every task submitted
// without a "budget". A caller that simply leaves "budget" out is never
// charged: its calls use tokens and money, its quota item stays at zero,
// and submit's quota check (Quotas.Check) never refuses it — the quota
// caps nothing. (The spend metrics — tokens and cost per minute on the
// overview — miss the same calls.) Smallest fix: in the worker, when
// Spend is configured, price and charge every settled provider call of a
// generate task to Quotas (and the metric), budget or not; only the
// budget Reserve/Settle stays conditional on t.HasBudget().
func TestAttack14bUnbudgetedCallsEscapeTheQuota(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		quota := &spend.Quota{Unit: spend.UnitTokens, Limit: 1_000_000}
		s := withBudgets(t, b, e.DDB, quota)
		ctx := context.Background()
		task := b.create(t, "atk14b-quota-unbudgeted", budgetedPrompt) // no budget member
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
