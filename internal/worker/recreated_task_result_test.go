package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A task's id is derived from (scope, idempotency key), and once TTL has
// deleted a terminal item (the retention window, 7 days) the same key may
// be submitted again: the new task starts at assignment_version 0
// (ledger.MinRetention), so its first attempt is version 1 again, while the
// old task's results are kept for 38 days. Keyed by task id and version
// alone, the new attempt's result key would hold the old task's result and
// its large result (too large for the item, so no inline fallback) could
// not be placed: the task would be parked although its one provider call
// succeeded. Results are keyed by the task's creation time as well
// (results/<task_id>/<created_ms>/<assignment_version>), so the re-created
// task's result is a new object.
func TestRecreatedTaskSavesItsLargeResultDespiteTheOldTasksObject(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, true)...)
		ctx := context.Background()
		big := func(fill string) *contract.Result {
			// Over DynamoDB's 400 KB item limit, well under the 8 MiB object limit.
			return &contract.Result{Output: []byte(`{"text":"` + strings.Repeat(fill, 500_000) + `"}`), Provider: "sim", ProviderRef: "ref-" + fill}
		}
		run := func(res *contract.Result) *ledger.Task {
			g := newGate(b.sim)
			close(g.release)
			g.late = res
			h := b.handler(b.l, g)
			h.Payloads = b.h.Payloads
			task := b.create(t, "reused-key", prompt)
			b.send(t, task.TaskID)
			wantNoFailures(t, handle(t, h, ctx, b.deliver(t, 1, 60)))
			return b.get(t, task.TaskID)
		}
		old := run(big("a"))
		wantState(t, old, ledger.StateCompleted)
		if old.ResultRef == nil || old.ResultRef.Key != payload.ResultKey(old.TaskID, old.CreatedMs, 1) {
			t.Fatalf("old task's result ref %+v, want results/<task>/<created_ms>/1", old.ResultRef)
		}
		// Past the retention window, DynamoDB's TTL deletes the item; the
		// result object stays (results/ expire after 38 days).
		b.clock.Advance(8 * 24 * time.Hour)
		if _, err := e.DDB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &e.Names.TasksTable,
			Key: map[string]ddbtypes.AttributeValue{"task_id": &ddbtypes.AttributeValueMemberS{Value: old.TaskID}}}); err != nil {
			t.Fatal(err)
		}
		got := run(big("b"))
		if got.State != ledger.StateCompleted {
			t.Fatalf("the re-submitted task's one successful call left it %s (%s: %s: %q), want completed with its result",
				got.State, got.ReviewReason, got.ErrorClass, got.ErrorMessage)
		}
	})
}
