package reconciler_test

import (
	"context"
	"errors"
	"fmt"
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
// caller with an error, and the reconciler reads the watch item while the
// task is absent. Performed within a dispatch timeout of the due time, the
// put is found through the item's recheck, read a dispatch timeout after
// it; performed after that recheck was read too, through the caller's
// repeat: a replay of a task queued, not in by_state and that far past its
// due time keeps its own watch item. Either way the
// accepted task (the replay answers with it) is not left queued with no
// by_state entry, no unread watch item and no SQS message (DESIGN §1.1).
func TestTaskPutPerformedAfterItsWatchItemCameDueIsNotLostWhenTheCallerRepeatsTheSubmit(t *testing.T) {
	t.Parallel()
	d := ledger.DefaultDispatchTimeout
	for _, late := range []time.Duration{time.Second, d + time.Second, 2*d + time.Second} {
		testenv.Each(t, func(t *testing.T, e *testenv.Env) {
			b := setup(t, e)
			put := &lateTaskPut{DynamoDB: e.DDB, table: e.Names.TasksTable}
			submit, err := ledger.New(put, b.l.Config())
			if err != nil {
				t.Fatal(err)
			}
			var watched, adopted int
			put.before = func() {
				b.clock.Advance(d + late)
				s := handle(t, b.handler())
				watched, adopted = s.Watched, s.Adopted
				if late > 2*d {
					s = handle(t, b.handler()) // the recheck, due a dispatch timeout after the item, read too
					watched, adopted = watched+s.Watched, adopted+s.Adopted
				}
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
			wantFound(t, b, e, dup.Task.TaskID, fmt.Sprintf("put %s past the due time; the run before the put: watched %d, adopted %d", late, watched, adopted))
		})
	}
}
