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
	})
}
