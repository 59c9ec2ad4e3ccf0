package spend_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// sweep does what DynamoDB's TTL sweeper does to the item at key: it
// deletes it once its expires_at (epoch seconds) is before now. The spend
// package never reads expires_at itself (an expired budget item counts
// until it is deleted), so the sweeper is the only way a budget item ends;
// the test deletes the item exactly when the sweeper may (the sweeper is
// usually later, never earlier). It reports whether it deleted the item.
func sweep(t *testing.T, e *testenv.Env, key string, now time.Time) bool {
	t.Helper()
	k := map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: key}}
	out, err := e.DDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.Names.TasksTable, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	exp, ok := out.Item["expires_at"].(*types.AttributeValueMemberN)
	if !ok {
		return false
	}
	if at, _ := strconv.ParseInt(exp.Value, 10, 64); at >= now.Unix() {
		return false
	}
	_, err = e.DDB.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &e.Names.TasksTable, Key: k,
		ConditionExpression:       aws.String("expires_at = :seen"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":seen": exp}})
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// TestChainBudgetOutlivesApprovalWait: a gated root task spends most of
// its chain's budget, then waits for approval (up to 30 days, with no
// write to the budget item). A regenerate of it 20 days later — the root
// still awaiting approval — inherits the chain's budget and must be refused
// what the chain no longer has, not admitted with a fresh budget because
// TTL deleted the chain's item meanwhile (DESIGN §13: the chain's budget
// bounds all its tasks together).
func TestChainBudgetOutlivesApprovalWait(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, nil) // the Accountant's default retention
		budget := spend.Budget{MaxTokens: 10_000}
		chain := spend.ChainKey("t_root")
		r1 := spend.Reservation{ID: "t_root.a1", Tokens: 9_000}
		if _, err := b.acct.Reserve(ctx, chain, budget, r1); err != nil {
			t.Fatal(err)
		}
		if _, err := b.acct.Settle(ctx, chain, r1, spend.Usage{InputTokens: 1_000, OutputTokens: 8_000}); err != nil {
			t.Fatal(err)
		}
		// The root awaits approval; 20 days on (inside the 30-day maximum
		// approval wait) its owner regenerates it.
		b.clock.Advance(20 * 24 * time.Hour)
		if sweep(t, e, spend.BudgetItemKey(chain), b.clock.Now()) {
			t.Logf("the sweeper may delete %s by day 20", spend.BudgetItemKey(chain))
		}
		_, err := b.acct.Reserve(ctx, chain, budget, spend.Reservation{ID: "t_child.a1", Tokens: 5_000})
		var be *spend.BudgetExhaustedError
		if !errors.As(err, &be) {
			t.Fatalf("the regenerate's reserve of 5000 tokens on a chain that spent 9000 of 10000: %v; want BudgetExhaustedError (the chain's budget must not restart from zero)", err)
		}
		if be.State.Spent.Tokens() != 9_000 {
			t.Fatalf("exhausted with spent %d tokens, want the chain's 9000", be.State.Spent.Tokens())
		}
		// The worst case: approved at the end of the longest approval
		// wait, the root is completed and kept for the tasks' retention; a
		// regenerate just before its end (a refused Reserve writes nothing,
		// so the chain's last write is still the settle at t0).
		b.clock.Set(t0.Add(ledger.MaxApprovalTTL + ledger.DefaultRetention - time.Minute))
		sweep(t, e, spend.BudgetItemKey(chain), b.clock.Now())
		if _, err := b.acct.Reserve(ctx, chain, budget, spend.Reservation{ID: "t_child2.a1", Tokens: 5_000}); !errors.As(err, &be) {
			t.Fatalf("a regenerate %s after the chain's last write: %v; want BudgetExhaustedError", b.clock.Now().Sub(t0), err)
		}
	})
}

// TestRetentionOutlastsApprovalAndTaskRetention pins the relation
// DefaultRetention is derived from: a change to the longest approval wait
// or to the tasks' retention must not leave budget items expiring first.
func TestRetentionOutlastsApprovalAndTaskRetention(t *testing.T) {
	if need := ledger.MaxApprovalTTL + ledger.DefaultRetention + ledger.DefaultMaxAge; spend.DefaultRetention < need {
		t.Fatalf("spend.DefaultRetention %s < max approval wait %s + task retention %s + age budget %s",
			spend.DefaultRetention, ledger.MaxApprovalTTL, ledger.DefaultRetention, ledger.DefaultMaxAge)
	}
}

// expiresAt reads the budget item's expires_at.
func (b *bundle) expiresAt(t *testing.T, budgetKey string) time.Time {
	t.Helper()
	n, ok := b.item(t, spend.BudgetItemKey(budgetKey))["expires_at"].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("%s has no expires_at", spend.BudgetItemKey(budgetKey))
	}
	s, _ := strconv.ParseInt(n.Value, 10, 64)
	return time.Unix(s, 0).UTC()
}

// TestEveryWriteRefreshesExpiry: Reserve, Settle and SettleIfReserved
// each move the budget item's expiry to now + DefaultRetention.
func TestEveryWriteRefreshesExpiry(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, nil)
		key, budget := spend.ChainKey("t_w"), spend.Budget{MaxTokens: 1_000}
		want := func(step string) {
			t.Helper()
			if got, w := b.expiresAt(t, key), b.clock.Now().Add(spend.DefaultRetention); !got.Equal(w) {
				t.Fatalf("after %s: expires_at %s, want %s", step, got, w)
			}
		}
		r1 := spend.Reservation{ID: "t_w.a1", Tokens: 100}
		if _, err := b.acct.Reserve(ctx, key, budget, r1); err != nil {
			t.Fatal(err)
		}
		want("reserve")
		b.clock.Advance(10 * 24 * time.Hour)
		if _, err := b.acct.Settle(ctx, key, r1, spend.Usage{InputTokens: 10}); err != nil {
			t.Fatal(err)
		}
		want("settle")
		r2 := spend.Reservation{ID: "t_w.a2", Tokens: 100}
		if _, err := b.acct.Reserve(ctx, key, budget, r2); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(10 * 24 * time.Hour)
		if ok, err := b.acct.SettleIfReserved(ctx, key, r2, spend.Usage{InputTokens: 10}); err != nil || !ok {
			t.Fatalf("SettleIfReserved = %v, %v", ok, err)
		}
		want("SettleIfReserved")
	})
}

// TestExtendKeepsAChainThatNeverCalls: a chain that grows by regenerates
// whose tasks never call the provider (cancelled while queued, refused
// before their call) writes nothing to its budget item; each regenerate
// extends it instead, so the budget is still there when a later task calls.
func TestExtendKeepsAChainThatNeverCalls(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, nil)
		budget := spend.Budget{MaxTokens: 10_000}
		kept, control := spend.ChainKey("t_kept"), spend.ChainKey("t_control")
		for _, key := range []string{kept, control} {
			r := spend.Reservation{ID: key + ".a1", Tokens: 9_000}
			if _, err := b.acct.Reserve(ctx, key, budget, r); err != nil {
				t.Fatal(err)
			}
			if _, err := b.acct.Settle(ctx, key, r, spend.Usage{InputTokens: 9_000}); err != nil {
				t.Fatal(err)
			}
		}
		// A chain without a budget item (nothing reserved yet) gets none.
		if ok, err := b.acct.Extend(ctx, spend.ChainKey("t_none")); err != nil || ok {
			t.Fatalf("Extend of an absent item = %v, %v; want false, nil", ok, err)
		}
		if it := b.item(t, spend.BudgetItemKey(spend.ChainKey("t_none"))); len(it) != 0 {
			t.Fatalf("Extend created %v", it)
		}
		// A regenerate every 30 days, none of them calling.
		for range 4 {
			b.clock.Advance(30 * 24 * time.Hour)
			if ok, err := b.acct.Extend(ctx, kept); err != nil || !ok {
				t.Fatalf("Extend = %v, %v; want the expiry moved", ok, err)
			}
			if got, w := b.expiresAt(t, kept), b.clock.Now().Add(spend.DefaultRetention); !got.Equal(w) {
				t.Fatalf("expires_at %s, want %s", got, w)
			}
			// Twice at the same time: the expiry is not sooner, nothing written.
			if ok, err := b.acct.Extend(ctx, kept); err != nil || ok {
				t.Fatalf("second Extend = %v, %v; want false (never shortened or rewritten)", ok, err)
			}
			sweep(t, e, spend.BudgetItemKey(kept), b.clock.Now())
			sweep(t, e, spend.BudgetItemKey(control), b.clock.Now())
		}
		var be *spend.BudgetExhaustedError
		if _, err := b.acct.Reserve(ctx, kept, budget, spend.Reservation{ID: "t_kept.late", Tokens: 5_000}); !errors.As(err, &be) || be.State.Spent.Tokens() != 9_000 {
			t.Fatalf("reserve 120 days on, on an extended chain: %v; want exhausted with 9000 spent", err)
		}
		// The control, never extended, was swept: the test's sweeper works.
		if it := b.item(t, spend.BudgetItemKey(control)); len(it) != 0 {
			t.Fatalf("the chain never extended still has its item 120 days on: %v", it)
		}
		if _, err := b.acct.Extend(ctx, "bad key!"); err == nil {
			t.Fatal("Extend accepted an invalid key")
		}
	})
}
