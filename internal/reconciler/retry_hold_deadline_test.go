package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A retry held back by a queue backlog gets its dispatch deadline clamped
// to its age deadline. The walk finds a retry_wait task only RelaySlack
// after its due_at, so the first run after the age deadline must still
// find and park it: the promise is a final state within the age budget
// plus one reconciler period, whichever second of the period the run
// falls on. Here the retry's message is gone (drained) and no worker
// claims it.
func TestHeldBackRetryIsParkedByTheFirstRunPastItsAgeDeadline(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		withThreshold := func(h *reconciler.Handler) { h.BacklogThreshold = 3 }
		task := retryBehindBacklog(t, b, "held-retry-near-deadline", func(n *ledger.NewTask) { n.MaxAge = 3 * time.Minute })
		s := runTwice(t, b, withThreshold)
		held := get(t, b, task.TaskID)
		if held.State != ledger.StateRetryWait {
			t.Fatalf("after the first due run: %s (summaries %+v), want retry_wait", held.State, s)
		}
		t.Logf("first due run: summaries %+v; due_at %v before the age deadline", s, time.UnixMilli(held.DeadlineMs).Sub(time.UnixMilli(held.DueAt)))
		// The message is gone; one second past the age deadline a run comes.
		e.DrainTaskIDs(t, e.Names.TaskQueueURL)
		b.clock.Set(time.UnixMilli(held.DeadlineMs).Add(time.Second))
		s = runTwice(t, b, withThreshold)
		if got := get(t, b, task.TaskID); got.State != ledger.StateNeedsReview {
			t.Fatalf("a run %v past the age deadline left the task %s (due_at %v ago; summaries %+v); want it parked",
				time.Second, got.State, b.clock.Now().Sub(time.UnixMilli(got.DueAt)), s)
		}
	})
}
