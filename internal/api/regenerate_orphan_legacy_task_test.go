package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestOrphanRetryOfATaskRecordedBeforeInputInheritedReplays: the orphan
// replay tells "the retry named no input and the task took its parent's"
// from "the input was dropped" by the task's input_inherited attribute —
// which tasks recorded before the attribute existed do not carry. A
// regenerate so recorded (same item, no input_inherited; its payload hash
// is unchanged) whose 202 was lost, its parent then swept by TTL: the
// client's retry — same caller, same key, same (empty) body — replays
// (200), not 422 idempotency-key-reused ("already used with a different
// request payload"), since nothing differs. Such tasks exist for a whole
// retention period after an upgrade.
func TestOrphanRetryOfATaskRecordedBeforeInputInheritedReplays(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e)
		onClock(t, b, clock)
		root := view(t, b.do(t, submitReq("legacy-root", body("p"))))
		wantStatus(t, b.do(t, cancelReq(root.TaskID)), http.StatusOK)
		resp := b.do(t, regenReq(root.TaskID, "legacy-regen", ""))
		wantStatus(t, resp, http.StatusAccepted)
		child := view(t, resp)
		// As the version before this one recorded it: no input_inherited.
		if _, err := e.DDB.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
			TableName:        &e.Names.TasksTable,
			Key:              map[string]ddbtypes.AttributeValue{"task_id": &ddbtypes.AttributeValueMemberS{Value: child.TaskID}},
			UpdateExpression: aws.String("REMOVE input_inherited"),
		}); err != nil {
			t.Fatal(err)
		}
		// Control, parent still there: the retry replays.
		r := b.do(t, regenReq(root.TaskID, "legacy-regen", ""))
		if r.StatusCode != http.StatusOK {
			t.Fatalf("setup: retry with the parent present: %d %s", r.StatusCode, r.Body)
		}
		clock.Advance(ledger.DefaultRetention + time.Hour)
		if _, err := e.DDB.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{
			TableName: &e.Names.TasksTable,
			Key:       map[string]ddbtypes.AttributeValue{"task_id": &ddbtypes.AttributeValueMemberS{Value: root.TaskID}},
		}); err != nil {
			t.Fatal(err)
		}
		r = b.do(t, regenReq(root.TaskID, "legacy-regen", ""))
		if r.StatusCode != http.StatusOK || r.Headers[api.HeaderIdempotentReplayed] != "true" {
			t.Fatalf("retry (same caller, key and empty body) of regenerate %s recorded before input_inherited existed, parent swept: %d %s; want 200 replayed, as with the parent present", child.TaskID, r.StatusCode, r.Body)
		}
	})
}
