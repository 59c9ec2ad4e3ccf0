package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestOperatorRetryOfAParkedTaskKeepsTheChainsSpend: a chain spends 58 of
// its 150 tokens; its third task is parked budget_exhausted and waits in
// needs_review — no deadline, no expires_at — while the chain's budget
// record is kept only spend.DefaultRetention after its last reservation.
// An operator's retry (opsapi.Apply, the CLI's and the page's one path)
// must never re-queue it onto a budget started from nothing spent: inside
// the retention it keeps the records alive (and the retried task is refused
// by the budget again); past it, with the records gone, it is refused with
// a *spend.RecordExpiredError and nothing changes.
func TestOperatorRetryOfAParkedTaskKeepsTheChainsSpend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		after time.Duration
		swept bool // the records are gone by then
	}{
		{"inside the retention", spend.DefaultRetention - 24*time.Hour, false},
		{"past the retention", spend.DefaultRetention + 24*time.Hour, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				ctx := context.Background()
				b := setup(t, e)
				sp := withBudgets(t, b, e.DDB, nil)
				root := b.create(t, "park-root", budgetedPrompt, budget(150, nil))
				b.run(t, root.TaskID)
				wantState(t, b.get(t, root.TaskID), ledger.StateCompleted)
				regen := b.create(t, "park-regen-1", budgetedPrompt, budget(150, root))
				b.run(t, regen.TaskID)
				wantState(t, b.get(t, regen.TaskID), ledger.StateCompleted)
				last := b.create(t, "park-regen-2", budgetedPrompt, budget(150, root))
				b.run(t, last.TaskID)
				parked := b.get(t, last.TaskID)
				if parked.State != ledger.StateNeedsReview || parked.ReviewReason != ledger.ReviewBudgetExhausted {
					t.Fatalf("setup: state %s reason %q, want needs_review budget_exhausted", parked.State, parked.ReviewReason)
				}
				wantSpent(t, b, spend.ChainKeyOf(root), 2*usedIn, 2*usedOut)
				calls := b.sim.Calls(last.TaskID)

				b.clock.Advance(c.after)
				for _, key := range []string{spend.ChainKeyOf(root), spend.TaskKeyOf(last)} {
					sweepExpired(t, b, spend.BudgetItemKey(key), b.clock.Now())
				}
				retry := ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops@example.com", Note: "retry it"}
				_, err := opsapi.Apply(ctx, b.l, nil, sp.Budgets, last.TaskID, retry)
				if c.swept {
					var re *spend.RecordExpiredError
					if !errors.As(err, &re) || re.TaskID != last.TaskID {
						t.Fatalf("operator retry %s on, the chain's record swept: %v; want *spend.RecordExpiredError", c.after, err)
					}
					if got := b.get(t, last.TaskID); got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted {
						t.Fatalf("after the refused retry: %s %q; want it left parked", got.State, got.ReviewReason)
					}
					return
				}
				if err != nil {
					t.Fatalf("operator retry %s on: %v", c.after, err)
				}
				wantState(t, b.get(t, last.TaskID), ledger.StateQueued)
				// The retried task runs with its chain's spend: past the
				// record's first expiry too (Keep extended it).
				b.clock.Advance(2 * 24 * time.Hour)
				sweepExpired(t, b, spend.BudgetItemKey(spend.ChainKeyOf(root)), b.clock.Now())
				b.run(t, last.TaskID)
				got := b.get(t, last.TaskID)
				if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted || b.sim.Calls(last.TaskID) != calls {
					t.Fatalf("the retried task: state %s reason %q, %d provider calls (before the retry %d); want needs_review budget_exhausted and no call — the chain had spent 58 of 150, a call reserves 110",
						got.State, got.ReviewReason, b.sim.Calls(last.TaskID), calls)
				}
			})
		})
	}
}
