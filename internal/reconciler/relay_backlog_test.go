package reconciler_test

// The outbox relay's backlog check must not starve a task whose send was
// lost.

import (
	"slices"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestLostSendUnderSustainedBacklogIsDispatched: the submit's send
// of a task is lost (dispatches 0: no message ever existed) while the task
// queue holds a backlog at the threshold for the task's whole age budget —
// a steady state under load, where workers drain what arrives. The relay
// holds the re-send back only at its first decision: held back run after
// run ("the message is most likely in the backlog"), the task would never
// get a message and would be parked budget_exhausted at its age deadline
// with no attempt made.
//
// Both halves of the promise: the task is final within its age budget plus
// one reconciler period, and it was dispatched before its age budget ended.
func TestLostSendUnderSustainedBacklogIsDispatched(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		const maxAge = 30 * time.Minute
		task := create(t, b, "lost-send-backlog", func(n *ledger.NewTask) { n.MaxAge = maxAge })
		// Other tasks' messages: the backlog (threshold 3), never consumed here.
		backlog := &dispatch.Sender{SQS: e.SQS, QueueURL: e.Names.TaskQueueURL}
		for _, k := range []string{"other-1", "other-2", "other-3"} {
			if err := backlog.Send(ctx, create(t, b, k).TaskID, "", 0); err != nil {
				t.Fatal(err)
			}
		}
		withThreshold := func(h *reconciler.Handler) { h.BacklogThreshold = 3 }
		deadline := time.UnixMilli(task.DeadlineMs)
		var deferred, resent int
		finalAt := time.Time{}
		for b.clock.Now().Before(deadline.Add(2 * time.Minute)) {
			b.clock.Advance(time.Minute)
			h := b.handler()
			withThreshold(h)
			s := handle(t, h)
			deferred += s.RelayDeferred
			resent += s.Resent
			if got := get(t, b, task.TaskID); !got.State.Live() {
				finalAt = b.clock.Now()
				break
			}
		}
		got := get(t, b, task.TaskID)
		ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL)
		sent := slices.Contains(ids, task.TaskID)
		t.Logf("relay deferred %d times, re-sent %d; task %s attempts %d dispatches %d; its message sent: %v",
			deferred, resent, got.State, got.Attempts, got.Dispatches, sent)
		if finalAt.IsZero() || finalAt.After(deadline.Add(time.Minute)) {
			t.Fatalf("not final within its age budget + one period: state %s at %v past the deadline", got.State, b.clock.Now().Sub(deadline))
		}
		if !sent {
			r, _ := b.l.GetReview(ctx, task.TaskID)
			t.Fatalf("a task whose only send was lost was never dispatched in its %v age budget (held back %d times by the backlog); "+
				"ended %s, review %s with %d attempts", maxAge, deferred, got.State, r.Reason, got.Attempts)
		}
	})
}
