package reconciler_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Summary.WatchPending is "the watch items not read yet when the run
// ended ... in no LiveTasks count until adopted" (the overview and the
// local status call it "submitted, not yet checked"). A watch item whose
// task is absent now holds its shard's cursor for a dispatch timeout, and
// WatchPending counts every item past the cursor: the task behind the
// held item, read and adopted by this very run, is then counted twice —
// in LiveTasks[active] and in WatchPending.
func TestWatchPendingDoesNotCountATaskAdoptedBehindAHeldCursor(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setupShards(t, e, 1) // the ghost and the task share the shard
		ghost := b.l.TaskID("alice", "never-put")
		pk, sk := ledger.WatchKey(b.l.Shard(ghost), b.clock.Now().Add(ledger.DefaultDispatchTimeout).UnixMilli(), ghost)
		if _, err := e.DDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.Names.WatchTable, Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk},
			"task_id": &types.AttributeValueMemberS{Value: ghost},
		}}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Millisecond)
		create(t, b, "behind-the-ghost")
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		s := handle(t, b.handler())
		if s.Adopted != 1 || s.LiveTasks[ledger.StateActive] != 1 {
			t.Fatalf("run: %+v; want the task behind the ghost adopted and counted live", s)
		}
		if s.WatchPending > 1 {
			t.Fatalf("watch pending = %d after the run read both items and adopted the task (live active %d): the adopted task is counted twice",
				s.WatchPending, s.LiveTasks[ledger.StateActive])
		}
	})
}
