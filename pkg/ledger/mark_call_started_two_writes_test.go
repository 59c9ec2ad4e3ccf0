package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestMarkOnlyWriteWithALostReplyIsTheCallersOwn: the mark-only first
// write (more than half a lease left) applied with its reply lost —
// retried by the SDK, or the retries exhausted — is the caller's own:
// marked, the lease and the index entry untouched, no second write.
func TestMarkOnlyWriteWithALostReplyIsTheCallersOwn(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{sdkRetry, exhausted} {
		t.Run(mode, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				ctx := context.Background()
				task := mustCreate(t, b, "mark-only-lost-reply-"+mode)
				c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				b.clock.Advance(14 * time.Second)
				l, lost := loseNth(t, b, mode, "UpdateItem", 1)
				m, err := l.MarkCallStarted(ctx, task.TaskID, c.AssignmentVersion, 30*time.Second, ledger.WithNonce(ledger.NewNonce()))
				if !lost() {
					t.Fatal("reply not lost")
				}
				if err != nil {
					t.Fatalf("mark, first write's reply lost: %v", err)
				}
				for _, got := range []*ledger.Task{m, mustGet(t, b, task.TaskID)} {
					if got.CallStartedVersion != c.AssignmentVersion || got.LeaseUntil != c.LeaseUntil || got.DueAt != c.DueAt {
						t.Fatalf("mark %d lease %d due %d; want mark %d, claim's lease %d due %d", got.CallStartedVersion, got.LeaseUntil, got.DueAt, c.AssignmentVersion, c.LeaseUntil, c.DueAt)
					}
				}
			})
		})
	}
}

// raceDDB runs between() once, right after the first UpdateItem that
// failed its condition (MarkCallStarted's first write), before the second.
type raceDDB struct {
	ledger.DynamoDB
	between func()
	done    bool
}

func (d *raceDDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := d.DynamoDB.UpdateItem(ctx, in, o...)
	var ccf *types.ConditionalCheckFailedException
	if !d.done && errors.As(err, &ccf) {
		d.done = true
		d.between()
	}
	return out, err
}

// TestMarkRequeuedBetweenItsWritesIsFenced: the lease ran out before the
// mark (its first write fails on the lease); between that and the
// renewing second write the reconciler re-queues the expired, unmarked
// assignment (RequeueUnstarted). The second write must be fenced and the
// task left queued without a mark.
func TestMarkRequeuedBetweenItsWritesIsFenced(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "mark-requeued-between-writes")
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(40 * time.Second)
		d := &raceDDB{DynamoDB: e.DDB, between: func() {
			if _, err := b.l.RequeueUnstarted(ctx, task.TaskID, c.AssignmentVersion); err != nil {
				t.Errorf("requeue between the writes: %v", err)
			}
		}}
		l, err := ledger.New(d, b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.MarkCallStarted(ctx, task.TaskID, c.AssignmentVersion, 30*time.Second)
		var fe *ledger.FencedError
		if !errors.As(err, &fe) {
			t.Fatalf("mark after the re-queue: %v; want *FencedError", err)
		}
		got := mustGet(t, b, task.TaskID)
		if got.State != ledger.StateQueued || got.CallStartedVersion == c.AssignmentVersion {
			t.Fatalf("task %s mark %d; want queued, unmarked", got.State, got.CallStartedVersion)
		}
	})
}
