package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
)

// watchItemsOf counts the watch items naming task id (a consistent scan:
// the tests' watch table holds few items).
func watchItemsOf(t *testing.T, e *testenv.Env, id string) int {
	t.Helper()
	n := 0
	p := dynamodb.NewScanPaginator(e.DDB, &dynamodb.ScanInput{
		TableName:                 &e.Names.WatchTable,
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("task_id = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: id}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += int(page.Count)
	}
	return n
}

// DESIGN §1.2: the same key with a different payload "is rejected with
// 422 and writes nothing". A watch item is a write that outlives the
// request by 14 days: the reconciler reads it and the task it names
// (one consistent read each), and the overview and the WatchPending
// metric count it as a submission not yet checked until then — a refused
// request, not a submission. A replay (200) is the existing task and
// submits nothing either. So neither may leave a watch item beside the
// one the accepted submit put.
func TestKeyReuseAndReplayLeaveNoWatchItem(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		resp := b.do(t, submitReq("watch-reuse", body("first payload")))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID
		if n := watchItemsOf(t, e, id); n != 1 {
			t.Fatalf("accepted submit left %d watch items, want 1", n)
		}

		wantProblem(t, b.do(t, submitReq("watch-reuse", body("another payload"))), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
		afterReuse := watchItemsOf(t, e, id)

		wantStatus(t, b.do(t, submitReq("watch-reuse", body("first payload"))), http.StatusOK)
		afterReplay := watchItemsOf(t, e, id)

		if afterReuse != 1 || afterReplay != 1 {
			t.Fatalf("watch items naming %s: %d after the 422 key reuse, %d after the 200 replay; want 1 each (only the accepted submit's)",
				id, afterReuse, afterReplay)
		}
	})
}
