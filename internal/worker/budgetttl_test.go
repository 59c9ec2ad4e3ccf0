package worker_test

import (
	"context"
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

// sweepExpired does what DynamoDB's TTL sweeper may do to the item at key
// at now: delete it once its expires_at is before now (the spend package
// never reads expires_at itself; the sweeper is what ends a budget item).
func sweepExpired(t *testing.T, b *bundle, key string, now time.Time) {
	t.Helper()
	k := map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: key}}
	out, err := b.e.DDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &b.e.Names.TasksTable, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := out.Item["expires_at"].(*types.AttributeValueMemberN)
	if !ok {
		return
	}
	if at, _ := strconv.ParseInt(n.Value, 10, 64); at < now.Unix() {
		if _, err := b.e.DDB.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &b.e.Names.TasksTable, Key: k}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSpendChainBudgetSurvivesApprovalWait: a gated root spends on its
// chain's budget (room for 150 tokens; a call reserves 110 and uses 29)
// and waits for approval. 20 days on — inside the 30-day approval wait,
// with nothing written to the chain's budget item meanwhile — two
// regenerates run: the first fits (58 spent), the second is parked
// budget_exhausted with no provider call, exactly as without the wait. A
// budget item that expired in between would have admitted the second.
func TestSpendChainBudgetSurvivesApprovalWait(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		withBudgets(t, b, e.DDB, nil)
		gated := func(n *ledger.NewTask) {
			n.ApprovalTTL = ledger.MaxApprovalTTL
			n.Plan = `{"approval":{"expires_in_seconds":2592000,"required":true},"deliver":[]}`
		}
		root := b.create(t, "ttl-root", budgetedPrompt, budget(150, nil), gated)
		b.run(t, root.TaskID)
		wantState(t, b.get(t, root.TaskID), ledger.StateAwaitingApproval)
		wantSpent(t, b, spend.ChainKeyOf(root), usedIn, usedOut)

		b.clock.Advance(20 * 24 * time.Hour)
		chainItem := spend.BudgetItemKey(spend.ChainKeyOf(root))
		sweepExpired(t, b, chainItem, b.clock.Now())
		wantState(t, b.get(t, root.TaskID), ledger.StateAwaitingApproval)

		regen := b.create(t, "ttl-regen-1", budgetedPrompt, budget(150, root), gated)
		b.run(t, regen.TaskID)
		wantState(t, b.get(t, regen.TaskID), ledger.StateAwaitingApproval)
		last := b.create(t, "ttl-regen-2", budgetedPrompt, budget(150, root), gated)
		b.run(t, last.TaskID)
		parked := b.get(t, last.TaskID)
		if parked.State != ledger.StateNeedsReview || parked.ReviewReason != ledger.ReviewBudgetExhausted || b.sim.Calls(last.TaskID) != 0 {
			t.Fatalf("the second regenerate, 20 days after the root spent: state %s reason %q, %d provider calls; want needs_review budget_exhausted and none (the chain had spent 58 of 150 tokens, the call reserves 110)",
				parked.State, parked.ReviewReason, b.sim.Calls(last.TaskID))
		}
		wantSpent(t, b, spend.ChainKeyOf(root), 2*usedIn, 2*usedOut)
	})
}
