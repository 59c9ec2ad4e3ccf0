package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRegenerateKeyReusedAfterRetentionDoesNotTakeTheChainReservation: the
// key-reuse case of TestKeyReusedAfterRetentionDoesNotTakeTheOldReservation
// on the CHAIN record of a regenerate. A chain's record is named by its
// root's id and creation, and a task's own record by its id and creation;
// a regenerate's chain record is shared by design, so the reservation ids
// on it must name the task's creation too.
//
// Regenerate C1 (key k1, chain of root R, budget 150) reserves 110 on the
// chain record, calls the provider (billed) and dies; the reconciler parks
// it unknown_outcome, an operator closes it failed — the chain record
// rightly keeps the 110 counted. Eight days later (C1 past its 7-day
// retention; the chain record lives 40 days) the caller regenerates a live
// task of the chain under k1 again: Create replaces C1's expired item with
// a fresh task under the SAME id, same chain (ChainRoot/ChainEpochMs
// inherited). Its attempt 1 must not find C1's reservation id on the chain
// record ("our lost write landed") and succeed without checking room (40
// left, 110 needed), nor settle over the dead billed call's 110.
func TestRegenerateKeyReusedAfterRetentionDoesNotTakeTheChainReservation(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		sp := withBudgets(t, b, e.DDB, nil)
		root := b.create(t, "chain-root", budgetedPrompt, budget(150, nil))
		regen := func(n *ledger.NewTask) { n.ParentTaskID = root.TaskID }
		old := b.create(t, "chain-k1", budgetedPrompt, budget(150, root), regen)
		chain := spend.ChainKeyOf(old)
		if chain != spend.ChainKeyOf(root) {
			t.Fatalf("setup: regenerate's chain %s, root's %s", chain, spend.ChainKeyOf(root))
		}

		dieAfterBilledCall(t, b, old.TaskID)
		if p := b.get(t, old.TaskID); p.State != ledger.StateNeedsReview {
			t.Fatalf("setup: %s, want needs_review", p.State)
		}
		fail := ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops@example.com", Note: "billed; not re-running it"}
		if _, err := opsapi.Apply(ctx, b.l, nil, sp.Budgets, old.TaskID, fail); err != nil {
			t.Fatalf("operator failed: %v", err)
		}
		before := spendState(t, b, chain)
		if before.ReservedTokens+before.Spent.Tokens() < reserveTokens {
			t.Fatalf("setup: chain record %+v does not count the billed call", before)
		}

		// Past C1's retention (7 days), inside the chain record's (40).
		b.clock.Advance(8 * 24 * time.Hour)
		fresh := b.create(t, "chain-k1", budgetedPrompt, budget(150, root), regen)
		if fresh.TaskID != old.TaskID || fresh.State != ledger.StateQueued || fresh.CreatedMs == old.CreatedMs {
			t.Fatalf("setup: the reused key made %s %s (created %d), want a fresh queued %s", fresh.TaskID, fresh.State, fresh.CreatedMs, old.TaskID)
		}
		if spend.ChainKeyOf(fresh) != chain {
			t.Fatalf("setup: the fresh regenerate's chain %s, want %s (same chain)", spend.ChainKeyOf(fresh), chain)
		}
		b.run(t, fresh.TaskID)

		after := spendState(t, b, chain)
		got := b.get(t, fresh.TaskID)
		calls := b.sim.Calls(fresh.TaskID) - 1
		used := func(s spend.State) int64 { return s.ReservedTokens + s.Spent.Tokens() }
		if calls != 0 || used(after) < used(before) {
			t.Fatalf("the reused key's fresh regenerate %s (same id, reservation id %s.a1 again, same chain record %s) was called %d time(s) with the chain at %d of 150 tokens used (a call needs %d): state %s %s; the chain record went from spent %d + reserved %d (the dead, billed call) to spent %d + reserved %d — a billed call forgotten, a provider call made without room reserved",
				fresh.TaskID, fresh.TaskID, chain, calls, used(before), reserveTokens, got.State, got.ReviewReason,
				before.Spent.Tokens(), before.ReservedTokens, after.Spent.Tokens(), after.ReservedTokens)
		}
	})
}

// TestRegenerateRecordedBeforeChainEpochSharesItsRootsChainRecord:
// ChainBudget names a regenerate's chain record "<ChainRoot>.<ChainEpochMs
// base 36>". A regenerate recorded before chain_epoch_ms existed carries
// chain_root but no chain_epoch_ms, and every regenerate of it inherits
// ChainEpoch() = 0 too. Named "chain.<root>.0", its record would not be its
// root's: the chain's tasks would reserve on two records, each with the
// whole budget, bypassing the chain's budget. So a chain whose root was
// created before ledger.BudgetNamesSince keeps its old record name (the
// root id alone), and a regenerate without chain_epoch_ms (0) names that
// one too. Such a regenerate can only exist in such a chain, so the test's
// chain starts before BudgetNamesSince. Root and regenerate each call once
// (29 tokens each, 150 budget, 110 reserved per call): 92 left, so a third
// task of the chain parks budget_exhausted without a call.
func TestRegenerateRecordedBeforeChainEpochSharesItsRootsChainRecord(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		b.clock.Set(time.UnixMilli(ledger.BudgetNamesSince).Add(-24 * time.Hour)) // the version before's day
		keptPastTheRealTime(t, b, withBudgets(t, b, e.DDB, nil))
		root := b.create(t, "epoch-root", budgetedPrompt, budget(150, nil))
		b.run(t, root.TaskID)
		wantState(t, b.get(t, root.TaskID), ledger.StateCompleted)

		legacy := b.create(t, "epoch-regen-1", budgetedPrompt, budget(150, root), func(n *ledger.NewTask) { n.ParentTaskID = root.TaskID })
		// As the version before recorded it: chain_root, no chain_epoch_ms.
		if _, err := e.DDB.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
			TableName:        &e.Names.TasksTable,
			Key:              map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: legacy.TaskID}},
			UpdateExpression: aws.String("REMOVE chain_epoch_ms"),
		}); err != nil {
			t.Fatal(err)
		}
		b.run(t, legacy.TaskID)
		wantState(t, b.get(t, legacy.TaskID), ledger.StateCompleted)

		// A regenerate of the legacy task, as api inheritBudget builds it.
		lp := b.get(t, legacy.TaskID)
		last := b.create(t, "epoch-regen-2", budgetedPrompt, func(n *ledger.NewTask) {
			n.ParentTaskID, n.BudgetMaxTokens = lp.TaskID, lp.BudgetMaxTokens
			n.ChainRoot, n.ChainEpochMs = lp.Chain(), lp.ChainEpoch()
		})
		b.run(t, last.TaskID)
		got := b.get(t, last.TaskID)
		rootChain := spendState(t, b, spend.ChainKeyOf(root))
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted || b.sim.Calls(last.TaskID) != 0 {
			t.Errorf("third task of chain %s (budget 150; root and regenerate %s spent %d+%d each, 110 reserved per call): %s %s with %d provider call(s); want needs_review budget_exhausted, no call. Records: root %s (%d tokens spent), regenerate recorded before chain_epoch_ms %s, its regenerate %s",
				root.TaskID, legacy.TaskID, usedIn, usedOut, got.State, got.ReviewReason, b.sim.Calls(last.TaskID),
				spend.ChainKeyOf(root), rootChain.Spent.Tokens(), spend.ChainKeyOf(lp), spend.ChainKeyOf(got))
		}
		if spend.ChainKeyOf(lp) != spend.ChainKeyOf(root) {
			t.Errorf("regenerate %s of root %s (recorded before chain_epoch_ms) names chain record %s; its root %s", lp.TaskID, root.TaskID, spend.ChainKeyOf(lp), spend.ChainKeyOf(root))
		}
	})
}

// TestChainSpendRecordedBeforeTheRenameStillCounts: chain spend recorded
// before budget records were named per creation is on "spend#chain.<root
// id>" (spend.ChainKey(root id), still the same function). A task created
// before ledger.BudgetNamesSince keeps those old names, so its chain's
// record is found after the upgrade: a chain that had spent 140 of its 150
// tokens under the old name does not start again from nothing, and its
// next regenerate (10 tokens left, a call needs 110) parks
// budget_exhausted without a call.
func TestChainSpendRecordedBeforeTheRenameStillCounts(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e)
		b.clock.Set(time.UnixMilli(ledger.BudgetNamesSince).Add(-24 * time.Hour)) // the version before's day
		sp := withBudgets(t, b, e.DDB, nil)
		keptPastTheRealTime(t, b, sp)
		root := b.create(t, "rename-root", budgetedPrompt, budget(150, nil))
		// The version before's worker: the root's call, on the old name.
		old := spend.ChainKey(root.TaskID)
		r := spend.Reservation{ID: root.TaskID + ".a1", Tokens: 150}
		if _, err := sp.Budgets.Reserve(ctx, old, spend.Budget{MaxTokens: 150}, r); err != nil {
			t.Fatal(err)
		}
		if _, err := sp.Budgets.Settle(ctx, old, r, spend.Usage{InputTokens: 100, OutputTokens: 40}); err != nil {
			t.Fatal(err)
		}
		regen := b.create(t, "rename-regen", budgetedPrompt, budget(150, root), func(n *ledger.NewTask) { n.ParentTaskID = root.TaskID })
		b.run(t, regen.TaskID)
		got := b.get(t, regen.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted || b.sim.Calls(regen.TaskID) != 0 {
			t.Errorf("regenerate %s of chain %s (budget 150, 140 spent on %s before the upgrade): %s %s with %d provider call(s); want needs_review budget_exhausted, no call (it reserved on %s: %+v)",
				regen.TaskID, root.TaskID, old, got.State, got.ReviewReason, b.sim.Calls(regen.TaskID), spend.ChainKeyOf(got), spendState(t, b, spend.ChainKeyOf(got)).Spent)
		}
	})
}

// keptPastTheRealTime gives b's worker a ledger, and s a budget
// accountant, whose retentions reach as far past the real time as they
// reach past b's clock. A test before ledger.BudgetNamesSince runs on a
// clock fixed in the past, and kumo deletes items whose expires_at is
// before the real time (every 30 s): a task ended then (7 days) or a
// budget record written then (40 days) would otherwise vanish mid-test
// once that much real time has passed.
func keptPastTheRealTime(t *testing.T, b *bundle, s *worker.Spend) {
	t.Helper()
	behind := max(time.Since(b.clock.Now()), 0)
	l, err := ledger.New(b.e.DDB, ledger.Config{TasksTable: b.e.Names.TasksTable, ReviewTable: b.e.Names.ReviewTable, Now: b.clock.Now, Shards: testShards,
		Retention: ledger.DefaultRetention + behind})
	if err != nil {
		t.Fatal(err)
	}
	b.l, b.h.Ledger = l, l
	if s.Budgets, err = spend.NewAccountant(spend.AccountantConfig{DB: b.e.DDB, TasksTable: b.e.Names.TasksTable, Now: b.clock.Now,
		Retention: spend.DefaultRetention + behind}); err != nil {
		t.Fatal(err)
	}
}
