package reconciler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// slowWatchPut runs during, after its watch item was written and before
// its reply returns, a submit's watch PutItem: the time a slow put
// (throttling repeats, a stalled connection) takes, on the ledger clock.
type slowWatchPut struct {
	ledger.DynamoDB
	table  string
	during func()
}

func (s *slowWatchPut) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := s.DynamoDB.PutItem(ctx, in, o...)
	if err == nil && aws.ToString(in.TableName) == s.table && s.during != nil {
		s.during()
		s.during = nil
	}
	return out, err
}

// A submit whose watch put returns only after the watch item came due
// must not leave an accepted task nobody can find. The reconciler reads
// the item at its due time, finds no task yet and moves its cursor past
// it; if Create then still puts the task (unindexed, its message lost),
// no watch item, index entry or message is left for it. Create's bound on
// the task put ("half the way to due_at") has to count from the time it
// chose due_at, not from the end of the watch put. (The deployed submit
// function's 10 s timeout keeps a 30 s put out of reach through the API;
// any other caller of Create has only the ledger's own bound.)
func TestSubmitWhoseWatchPutOutlastsItsDueTimeIsNotLost(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		slow := &slowWatchPut{DynamoDB: e.DDB, table: e.Names.WatchTable}
		submit, err := ledger.New(slow, b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		var during []string
		slow.during = func() {
			b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
			s := handle(t, b.handler())
			during = append(during, "watched", itoa(s.Watched), "adopted", itoa(s.Adopted))
		}
		task, err := submit.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: "slow-watch-put", Kind: "generate",
			Input: `{"prompt":"hello"}`, PayloadSHA256: "sha-slow"})
		if err != nil {
			// Refused: not accepted, nothing to lose (the caller repeats it).
			if _, gerr := b.l.Get(ctx, b.l.TaskID("alice", "slow-watch-put")); gerr == nil {
				t.Fatalf("Create failed (%v) but left its task behind", err)
			}
			return
		}
		// Accepted, and its SQS send lost: the reconciler must find it.
		wantFound(t, b, e, task.TaskID, fmt.Sprintf("the run during the watch put: %v", during))
	})
}

func itoa(n int) string { return fmt.Sprint(n) }
