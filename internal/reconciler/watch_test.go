package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A task that ends before its dispatch deadline never enters by_state:
// neither the submit, the claim nor the completion writes state_shard,
// and the run that reads its watch item adopts nothing.
func TestTaskEndingBeforeItsDispatchDeadlineIsNeverIndexed(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "quick")
		if got := get(t, b, task.TaskID); got.StateShard != "" {
			t.Fatalf("submitted task indexed: state_shard %q", got.StateShard)
		}
		c := claim(t, b, task.TaskID)
		if got := get(t, b, task.TaskID); got.StateShard != "" {
			t.Fatalf("claimed task indexed: state_shard %q", got.StateShard)
		}
		if _, err := b.l.Complete(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"text":"ok"}`}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		s := handle(t, b.handler())
		if s.Watched != 1 || s.Adopted != 0 || s.Examined != 0 {
			t.Fatalf("run over a completed watched task: %+v; want 1 watched, nothing adopted or examined", s)
		}
		if s := handle(t, b.handler()); s.Watched != 0 {
			t.Fatalf("the next run read %d watch items again; the cursor must have passed them", s.Watched)
		}
	})
}

// A submit whose SQS send was lost is found through its watch item at its
// dispatch deadline, not before: adopted into by_state and re-sent in the
// same run, once; later runs read no watch item again.
func TestWatchFindsASubmitWhoseSendWasLost(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "lost")
		b.clock.Advance(ledger.DefaultDispatchTimeout - time.Second)
		if s := handle(t, b.handler()); s.Watched != 0 || s.Resent != 0 {
			t.Fatalf("run before the dispatch deadline: %+v; want nothing read or sent", s)
		}
		b.clock.Advance(2 * time.Second)
		s := handle(t, b.handler())
		if s.Watched != 1 || s.Adopted != 1 || s.Resent != 1 {
			t.Fatalf("run after the dispatch deadline: %+v; want 1 watched, adopted and re-sent", s)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 || ids[0] != task.TaskID {
			t.Fatalf("queue = %v, want one message for %s", ids, task.TaskID)
		}
		if got := get(t, b, task.TaskID); got.StateShard != b.l.StateShard(ledger.StateQueued, task.TaskID) || got.Dispatches != 1 {
			t.Fatalf("adopted task: state_shard %q dispatches %d", got.StateShard, got.Dispatches)
		}
		if s := handle(t, b.handler()); s.Watched != 0 || s.Resent != 0 {
			t.Fatalf("next run: %+v; want no watch item read and no re-send", s)
		}
	})
}

// A worker that dies holding a watched task's lease is found: the run at
// the dispatch deadline adopts the running task (its lease still held,
// nothing else happens), and a run after the lease's end applies the
// expired-lease rule to it through by_state.
func TestWatchAdoptsARunningTaskWhoseWorkerLaterDies(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "dies")
		b.clock.Advance(20 * time.Second)
		claim(t, b, task.TaskID) // lease until 50 s; due at 30 s
		b.clock.Advance(11 * time.Second)
		s := handle(t, b.handler())
		if s.Adopted != 1 || s.Requeued+s.ExpiredToUnknown+s.Parked != 0 {
			t.Fatalf("run while the lease holds: %+v; want the task adopted and left alone", s)
		}
		if got := get(t, b, task.TaskID); got.State != ledger.StateRunning || got.StateShard == "" {
			t.Fatalf("adopted running task: state %s state_shard %q", got.State, got.StateShard)
		}
		b.clock.Advance(30 * time.Second)
		s = handle(t, b.handler())
		if s.Watched != 0 || s.Requeued+s.ExpiredToUnknown != 1 {
			t.Fatalf("run after the lease's end: %+v; want the expired lease handled from by_state", s)
		}
		if got := get(t, b, task.TaskID); got.State == ledger.StateRunning {
			t.Fatalf("task still running after its worker died: %+v", got)
		}
	})
}

// A watch item whose task was never put (the submit failed between its
// two puts) does not hold up the items behind it in its shard; it is read
// once more a dispatch timeout later (the task's put might still land),
// and then passed over for good. Until then it is the one submission
// pending: the task behind it, adopted, counts as live only.
func TestWatchItemWithoutItsTaskIsReadOnceMoreThenPassedOver(t *testing.T) {
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
		task := create(t, b, "behind-the-ghost")
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		s := handle(t, b.handler())
		if s.Watched != 2 || s.Resent != 1 || s.WatchPending != 1 || s.LiveTasks[ledger.StateActive] != 1 {
			t.Fatalf("run: %+v; want both watch items read, the real task re-sent and live, the ghost's second read pending", s)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 || ids[0] != task.TaskID {
			t.Fatalf("queue = %v, want one message for %s", ids, task.TaskID)
		}
		if s := handle(t, b.handler()); s.Watched != 0 {
			t.Fatalf("next run, within a dispatch timeout of the ghost's due time, read %d watch items", s.Watched)
		}
		b.clock.Advance(ledger.DefaultDispatchTimeout)
		if s := handle(t, b.handler()); s.Watched != 1 || s.WatchPending != 0 {
			t.Fatalf("run a dispatch timeout past the ghost's due time: %+v; want the ghost read once more, nothing left pending", s)
		}
		if s := handle(t, b.handler()); s.Watched != 0 {
			t.Fatalf("the run after read %d watch items again", s.Watched)
		}
	})
}

// failAdopt fails the first adopt write (a throttle, after nothing was
// written), and counts the adopt writes it let through.
type failAdopt struct {
	ledger.DynamoDB
	failed, passed atomic.Int32
}

func (f *failAdopt) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if strings.Contains(aws.ToString(in.ConditionExpression), "attribute_not_exists(#state_shard)") {
		if f.failed.CompareAndSwap(0, 1) {
			return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("injected")}
		}
		f.passed.Add(1)
	}
	return f.DynamoDB.UpdateItem(ctx, in, o...)
}

// A failed adopt leaves the cursor before the task's watch item: the next
// run reads it again and adopts the task, so a lost message is never
// passed over because a write failed.
func TestWatchCursorStaysBeforeATaskItCouldNotAdopt(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		fa := &failAdopt{DynamoDB: e.DDB}
		l, err := ledger.New(fa, b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		b.l = l
		task := create(t, b, "throttled-adopt")
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		h := b.handler()
		s, err := h.Handle(ctx, []byte(`{}`))
		var re *reconciler.RunError
		if !errors.As(err, &re) || s.Adopted != 0 || s.Resent != 0 {
			t.Fatalf("run with the adopt throttled: %+v, %v; want a run error and nothing adopted", s, err)
		}
		s = handle(t, b.handler())
		if s.Watched != 1 || s.Adopted != 1 || s.Resent != 1 || fa.passed.Load() != 1 {
			t.Fatalf("next run: %+v (adopt writes %d); want the same watch item read again, adopted and re-sent", s, fa.passed.Load())
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 || ids[0] != task.TaskID {
			t.Fatalf("queue = %v, want one message for %s", ids, task.TaskID)
		}
	})
}

// lagIndex hides every by_state entry from the walk's queries, as
// DynamoDB's eventually consistent index may for an entry just written.
type lagIndex struct{ ledger.DynamoDB }

func (l lagIndex) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if aws.ToString(in.IndexName) == ledger.ByStateIndex {
		return &dynamodb.QueryOutput{}, nil
	}
	return l.DynamoDB.Query(ctx, in, o...)
}

// A task the watch adopts is handled in the same run even when the index
// does not show its new entry to the walk yet: a lost send is re-sent in
// the run that found it, not one period later.
func TestAdoptedTaskIsHandledInTheSameRunWhileTheIndexLags(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		l, err := ledger.New(lagIndex{e.DDB}, b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		b.l = l
		task := create(t, b, "lagging-index")
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		if s := handle(t, b.handler()); s.Adopted != 1 || s.Resent != 1 {
			t.Fatalf("run: %+v; want the task adopted and re-sent in the same run", s)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 || ids[0] != task.TaskID {
			t.Fatalf("queue = %v, want one message for %s", ids, task.TaskID)
		}
	})
}

// wantFound runs the reconciler three times a minute apart and fails when
// task id is still queued with no message sent: nothing would ever run it
// (what says what happened to it before).
func wantFound(t *testing.T, b *bundle, e *testenv.Env, id, what string) {
	t.Helper()
	for range 3 {
		b.clock.Advance(time.Minute)
		handle(t, b.handler())
	}
	ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL)
	if got := get(t, b, id); len(ids) == 0 && got.State == ledger.StateQueued {
		t.Fatalf("accepted task %s lost: queued, state_shard %q, watch items %q, no message after three runs (%s)", id, got.StateShard, e.WatchSKs(t, id), what)
	}
}
