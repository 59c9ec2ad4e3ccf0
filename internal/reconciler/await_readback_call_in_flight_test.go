package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestAwaitReadbackWithCallInFlightIsNotCalledAbsent: the deduplicating
// twin of TestExpiredLeasePastDeadlineWithCallInFlightIsNotCalledAbsent.
// A worker's renewals stop reaching the table while its call runs on
// (heartbeat.go lets it); its lease expires with budget left and the
// reconciler re-queues it; the age deadline passes before another attempt
// starts, so the relay moves the task to unknown (AwaitReadback) and reads
// the provider back in the same run — while the call is still in flight,
// within its lease's end plus the call timeout. That "not found" proves
// nothing: the call then generates. The parked task's review must not
// list as known that nothing was generated (DESIGN §1.4, §1.6).
func TestAwaitReadbackWithCallInFlightIsNotCalledAbsent(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{LongDelay: 4 * time.Second, CallTimeout: time.Minute})
		task := create(t, b, "await-readback-inflight", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)
		b.clock.Set(deadline.Add(-time.Minute))
		claim(t, b, task.TaskID) // lease until deadline - 30 s

		b.clock.Set(deadline.Add(-20 * time.Second)) // lease expired, budget left: re-queued
		if s := handle(t, b.handler()); s.Requeued != 1 {
			t.Fatalf("summary = %+v, want the expired lease re-queued", s)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL)

		done := startLongCall(t, b, task)          // the lapsed worker's call, still running (started before its lease ended)
		b.clock.Set(deadline.Add(5 * time.Second)) // 35 s after the lease's end: within the 1-minute call timeout
		wantParkedWithoutFalseCertainty(t, b, task, done)
	})
}

// wantParkedWithoutFalseCertainty runs the reconciler while the call done
// reports on is in flight, then, that call having generated, fails t
// unless the task is parked and its review does not list as known that
// nothing was generated: the "not found" it read back proved nothing.
func wantParkedWithoutFalseCertainty(t *testing.T, b *bundle, task *ledger.Task, done <-chan error) {
	t.Helper()
	s := handle(t, b.handler())
	if err := <-done; err != nil {
		t.Fatalf("the in-flight call failed: %v", err)
	}
	if n := b.prov.SideEffects(task.TaskID); n != 1 {
		t.Fatalf("provider side effects = %d, want the in-flight call's one generation", n)
	}
	got := get(t, b, task.TaskID)
	r, err := b.l.GetReview(ctx, task.TaskID)
	if got.State != ledger.StateNeedsReview || err != nil {
		t.Fatalf("task %s (run %+v; review %v), want parked", got.State, s, err)
	}
	if text := r.Summary + "\n" + strings.Join(r.Known, "\n"); strings.Contains(text, "nothing was generated") {
		t.Fatalf("the provider generated in a call in flight when the reconciler read back, yet the review (%s, run %+v) says nothing was generated:\n%s\n%s",
			r.Reason, s, text, strings.Join(r.Uncertain, "\n"))
	}
}
