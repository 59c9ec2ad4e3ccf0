package reconciler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// lateTaskPut delays a submit's task PutItem on its way to the server:
// before forwarding the first PutItem of table, it runs before (the
// reconciler's run once the submit's watch item came due); the server then
// performs the put, and the caller, whose deadline passed long ago, gets
// no reply (context.DeadlineExceeded).
type lateTaskPut struct {
	ledger.DynamoDB
	table  string
	before func()
}

func (s *lateTaskPut) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if aws.ToString(in.TableName) != s.table || s.before == nil {
		return s.DynamoDB.PutItem(ctx, in, o...)
	}
	s.before()
	s.before = nil
	if _, err := s.DynamoDB.PutItem(context.WithoutCancel(ctx), in, o...); err != nil {
		return nil, err
	}
	return nil, context.DeadlineExceeded
}

// A submit whose task put reaches DynamoDB only after its watch item came
// due (the client gave up at its deadline, half the way to due_at, but the
// request was still on its way and was performed later) answers the
// caller with an error; the caller repeats the request, and the repeat is
// a replay (the task is there now), which deletes its own watch item and
// sends nothing. The reconciler had read the first watch item while the
// task was absent and moved its cursor past it. The accepted task (the
// replay answers 200 with it) is then queued, in no by_state entry, with
// no unread watch item and no SQS message: nothing will ever run it
// (DESIGN §1.1). Create's bound on its puts is the client's deadline; it
// does not bound when the server performs a request already sent.
func TestTaskPutPerformedAfterItsWatchItemCameDueIsNotLostWhenTheCallerRepeatsTheSubmit(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		late := &lateTaskPut{DynamoDB: e.DDB, table: e.Names.TasksTable}
		submit, err := ledger.New(late, b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		var watched, adopted int
		late.before = func() {
			b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
			s := handle(t, b.handler())
			watched, adopted = s.Watched, s.Adopted
		}
		n := ledger.NewTask{Scope: "alice", IdempotencyKey: "late-task-put", Kind: "generate",
			Input: `{"prompt":"hello"}`, PayloadSHA256: "sha-late"}
		if _, err := submit.Create(ctx, n); err == nil {
			t.Fatal("Create whose task put's reply never came = nil error; want the deadline's error")
		}
		// The caller repeats the request (same key, same payload): a replay.
		_, err = b.l.Create(ctx, n)
		var dup *ledger.DuplicateError
		if !errors.As(err, &dup) {
			t.Fatalf("the caller's repeat = %v; want a replay of the task the late put wrote", err)
		}
		for range 3 {
			b.clock.Advance(time.Minute)
			handle(t, b.handler())
		}
		ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL)
		got := get(t, b, dup.Task.TaskID)
		if len(ids) == 0 && got.State == ledger.StateQueued {
			t.Fatalf("accepted task %s lost: queued, state_shard %q, watch items %q, no message after three runs (the run before the put: watched %d, adopted %d)",
				got.TaskID, got.StateShard, e.WatchSKs(t, got.TaskID), watched, adopted)
		}
	})
}
