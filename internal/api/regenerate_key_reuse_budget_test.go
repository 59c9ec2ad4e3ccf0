package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestReusedKeyRegenerateWritesNoBudget: the same Idempotency-Key with a
// different payload "is rejected with 422 and writes nothing". For a
// budgeted regenerate that includes the chain's budget item: the 422
// idempotency-key-reused makes no UpdateItem and leaves its expires_at
// where it was (extendChainBudget must not run before the key is found
// reused), so a malformed or reused request never changes what TTL keeps.
func TestReusedKeyRegenerateWritesNoBudget(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e, withSpend(e, clock, nil))
		onClock(t, b, clock)
		root := view(t, b.do(t, submitReq("reuse-root", budgetBody("p", `{"max_total_tokens":10000}`))))
		chain := spend.ChainKeyOf(stored(t, b, root.TaskID))
		if _, err := b.h.Budgets.Reserve(ctx, chain, spend.Budget{MaxTokens: 10_000}, spend.Reservation{ID: root.TaskID + ".a1", Tokens: 100}); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, b.do(t, regenReq(root.TaskID, "reuse-regen", `{"input":{"prompt":"one","max_tokens":100}}`)), http.StatusAccepted)
		before, _ := budgetItem(t, e, chain, clock.Now())["expires_at"].(*ddbtypes.AttributeValueMemberN)

		clock.Advance(24 * time.Hour)
		e.Counter.Reset()
		wantProblem(t, b.do(t, regenReq(root.TaskID, "reuse-regen", `{"input":{"prompt":"two","max_tokens":100}}`)), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
		calls := e.Counter.Calls()
		after, _ := budgetItem(t, e, chain, clock.Now())["expires_at"].(*ddbtypes.AttributeValueMemberN)
		if calls["DynamoDB.UpdateItem"] != 0 || before == nil || after == nil || before.Value != after.Value {
			t.Fatalf("422 idempotency-key-reused made %v; the chain budget's expires_at %v -> %v; want nothing written", calls, before, after)
		}
	})
}
