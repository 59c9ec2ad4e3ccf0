package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// DESIGN §1.1: every accepted task ends in a final state (completed,
// failed, cancelled or needs_review) within its age budget plus one
// reconciler period. A claim is allowed until the age deadline and a call
// may take the call timeout (2 minutes by default), so a task claimed a
// second before its deadline would still be running a period after it;
// the call is cut at the deadline instead, and the task is final at the
// first reconciler run after it.
func TestTaskClaimedAtItsAgeDeadlineIsFinalWithinOneReconcilerPeriod(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		task := b.create(t, "claimed-at-deadline", prompt, func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)
		b.clock.Set(deadline.Add(-time.Second))
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		done := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
		g.waitStarted(t) // claimed before the deadline; the call is under way
		// The gate is never released: only the age deadline (a second
		// away on the ledger's clock) ends the call.
		await(t, done)
		if g.Cause() == nil {
			t.Fatal("the call was not cut by the worker")
		}
		b.clock.Set(deadline.Add(time.Minute))
		s := b.reconcile(t, b.sim) // the run one period past the deadline
		if got := b.get(t, task.TaskID); got.State.Live() {
			t.Fatalf("one reconciler period past its age deadline the task is still %s (summary %+v); DESIGN §1 promises a final state by then",
				got.State, s)
		}
	})
}
