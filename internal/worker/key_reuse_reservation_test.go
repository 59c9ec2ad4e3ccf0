package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestKeyReusedAfterRetentionDoesNotTakeTheOldReservation: a key is free
// again once its task's retention (ledger, 7 days) is over; Create
// replaces the expired item with a fresh task under the SAME task id (the
// id is derived from scope and key), park_count 0, attempts 0. The budget
// items are kept 40 days (spend.DefaultRetention), so they are named per
// task creation (ledger.Task.ChainBudget, OwnBudget), not by the id alone.
//
// The old task's first attempt reserved 110 of its 150 tokens, called the
// provider (billed) and died; the reconciler parked it unknown_outcome and
// an operator closed it as failed: the chain's record rightly keeps the 110
// counted (nobody knows what that call used). Eight days later the caller
// submits under the same key. The fresh task's attempt 1 must not find its
// reservation already on the old record ("our lost write landed / a
// redelivery") and succeed without reserving or checking room (40 tokens
// left, 110 needed), nor settle over the dead, billed call's reservation:
// the fresh task has records of its own, and the old record is left as it
// was.
func TestKeyReusedAfterRetentionDoesNotTakeTheOldReservation(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		sp := withBudgets(t, b, e.DDB, nil)
		old := b.create(t, "reuse-after-retention", budgetedPrompt, budget(150, nil))
		chain := spend.ChainKeyOf(old)

		dieAfterBilledCall(t, b, old.TaskID)
		if p := b.get(t, old.TaskID); p.State != ledger.StateNeedsReview {
			t.Fatalf("setup: %s, want needs_review", p.State)
		}
		fail := ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops@example.com", Note: "the provider's bill shows the call ran; not re-running it"}
		if _, err := opsapi.Apply(ctx, b.l, nil, sp.Budgets, old.TaskID, fail); err != nil {
			t.Fatalf("operator failed: %v", err)
		}
		before := spendState(t, b, chain)
		if before.ReservedTokens+before.Spent.Tokens() < reserveTokens {
			t.Fatalf("setup: chain record %+v does not count the billed call", before)
		}

		// Past the task's retention (7 days), inside the budget record's (40).
		b.clock.Advance(8 * 24 * time.Hour)
		fresh := b.create(t, "reuse-after-retention", budgetedPrompt, budget(150, nil))
		if fresh.TaskID != old.TaskID || fresh.State != ledger.StateQueued {
			t.Fatalf("setup: the reused key made %s %s, want a fresh queued %s", fresh.TaskID, fresh.State, old.TaskID)
		}
		b.run(t, fresh.TaskID)

		after := spendState(t, b, chain)
		calls := b.sim.Calls(fresh.TaskID)
		if before.ReservedTokens+before.Spent.Tokens() > after.ReservedTokens+after.Spent.Tokens() {
			t.Fatalf("the reused key's fresh task (same id %s, attempt 1, reservation id %s.a1 again) was called (%d calls for the id) with the chain record at %d of 150 tokens used (a call needs %d): its Reserve took the old task's held reservation for its own and its settle replaced it — the record went from spent %d + reserved %d (the dead, billed call) to spent %d + reserved %d: a billed call forgotten, a call made without room reserved (task %s)",
				fresh.TaskID, fresh.TaskID, calls, before.ReservedTokens+before.Spent.Tokens(), reserveTokens,
				before.Spent.Tokens(), before.ReservedTokens, after.Spent.Tokens(), after.ReservedTokens, b.get(t, fresh.TaskID).State)
		}
		// The fresh task is a new task with a budget of its own: its
		// records are named by its creation, it runs within its budget,
		// and the old task's record is left as it was.
		got := b.get(t, fresh.TaskID)
		if own := spend.ChainKeyOf(got); own == chain || got.State != ledger.StateCompleted || calls != 2 {
			t.Fatalf("the fresh task: chain record %s (the old one %s), %s, %d calls for the id; want its own record, completed, 2 calls (the old task's and its own)", own, chain, got.State, calls)
		}
		wantSpent(t, b, spend.ChainKeyOf(got), usedIn, usedOut)
		if after != before {
			t.Fatalf("the old task's record changed: %+v → %+v", before, after)
		}
	})
}
