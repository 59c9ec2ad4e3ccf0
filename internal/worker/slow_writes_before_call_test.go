package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestSlowWritesBeforeTheCallGiveTheAttemptBack: the invocation is
// checked for one call timeout of time after the claim, but the writes
// between that check and the call (the call-start mark here) can take
// seconds on a loaded DynamoDB. A call started with less than its call
// timeout left is cut by the invocation's deadline: an uncertain outcome,
// which for a provider without idempotency or readback is a person's
// review, caused by nothing but our own slow writes. So the time is
// checked again just before the call, and when it has run short the task
// is given back, uncalled, with its attempt.
func TestSlowWritesBeforeTheCallGiveTheAttemptBack(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		const (
			// The give-back's writes have the margin: seconds on a loaded
			// moto.
			margin      = 5 * time.Second
			callTimeout = time.Second
			// The claim has up to 2 s (a loaded moto) and still leaves a
			// call timeout; the mark then leaves at most 0.5 s.
			slack    = 2 * time.Second
			slowMark = 2500 * time.Millisecond
		)
		b := setup(t, e, withSim(simulated.Options{Latency: 600 * time.Millisecond, NoIdempotency: true, NoReadback: true}),
			withHandler(func(h *worker.Handler) { h.DeadlineMargin = margin; h.CallTimeout = callTimeout }))
		task := b.create(t, "slow-mark", prompt)
		b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			// 1: the claim, 2: the call-start mark, answered slowly.
			if c.TaskID == task.TaskID && c.Key() == "DynamoDB.UpdateItem" && c.N == 2 {
				time.Sleep(slowMark)
			}
			return ""
		})

		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		// Work has a call timeout and the slack after the margin: enough
		// for the call at the claim, not after the mark.
		ctx, cancel := context.WithTimeout(context.Background(), margin+callTimeout+slack)
		defer cancel()
		wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
		got := b.get(t, task.TaskID)
		if !strings.Contains(b.logs.String(), "too little time left before the call") {
			t.Fatalf("setup: the worker did not stop for lack of time just before the call (task %s):\n%s", got.State, b.logs.String())
		}
		if calls := b.sim.Calls(task.TaskID); calls != 0 {
			t.Fatalf("the provider was called %d time(s) with less than its call timeout left (task %s, error %q)", calls, got.State, got.ErrorClass)
		}
		if got.State != ledger.StateQueued || got.Attempts != 0 || got.LeaseOwner != "" {
			t.Fatalf("task %s with %d attempts, owner %q; want queued with the attempt given back", got.State, got.Attempts, got.LeaseOwner)
		}
		// The message is visible again at once; the next invocation, with
		// time enough, completes the task.
		wantNoFailures(t, handle(t, b.h, context.Background(), b.deliver(t, 1, 1)))
		if got := b.get(t, task.TaskID); got.State != ledger.StateCompleted || b.sim.SideEffects(task.TaskID) != 1 {
			t.Fatalf("the task ended %s with %d side effects; want completed with 1", got.State, b.sim.SideEffects(task.TaskID))
		}
	})
}
