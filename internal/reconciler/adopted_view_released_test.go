package reconciler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// hookedDB runs before once, ahead of the first by_state index query (the
// walk's first page, after the watch adopted what it read).
type hookedDB struct {
	ledger.DynamoDB
	armed  atomic.Bool
	before func()
}

func (d *hookedDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if in.IndexName != nil && d.armed.CompareAndSwap(true, false) {
		d.before()
	}
	return d.DynamoDB.Query(ctx, in, opts...)
}

// A claimed task whose worker paused past both its lease and its age
// deadline is adopted by the watch as running. If that worker resumes and
// releases it before the walk (the task is queued again, due_at clamped to
// the passed age deadline), the walk finds it queued and past its age
// budget: the run must park it then (its promise is a final state within
// one period of the deadline), not apply the running rule to the task as
// the adopt saw it, whose fenced writes can only be refused.
func TestWalkParksATaskReleasedAfterTheWatchAdoptedItPastItsDeadline(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		db := &hookedDB{DynamoDB: e.DDB}
		l, err := ledger.New(db, b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		b.l = l
		task := create(t, b, "released-after-adopt", func(n *ledger.NewTask) { n.MaxAge = 40 * time.Second })
		claimed := claim(t, b, task.TaskID)
		b.clock.Advance(45 * time.Second) // past the dispatch timeout, the lease (+ grace) and the age deadline
		var released *ledger.Task
		db.before = func() {
			r, err := b.l.Release(ctx, task.TaskID, claimed.AssignmentVersion)
			if err != nil {
				t.Errorf("release: %v", err)
			}
			released = r
		}
		db.armed.Store(true)
		s := handle(t, b.handler())
		if released == nil || released.State != ledger.StateQueued || released.DueAt >= b.clock.Now().UnixMilli() {
			t.Fatalf("the worker's release between the watch and the walk: %+v; want queued and due", released)
		}
		if s.Adopted != 1 {
			t.Fatalf("summary %+v: want the claimed task adopted by the watch", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview {
			t.Fatalf("task %s past its age deadline after the run that walked it: state %s, want needs_review (parked); summary %+v", got.TaskID, got.State, s)
		}
	})
}
