package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestReadbackNotFoundAfterEveryCallEndedDoesNotSayACallMayStillRun: a
// provider that deduplicates and reads back. Attempt 1's lease lapses and
// is re-queued with its outcome open; its call may run until its lease's
// end plus the call timeout. Attempts 2 and 3 each end with their worker's
// own word (a gateway's 504 whose Retry-After reaches past the age
// deadline: MarkUnknown) — their calls had ended. Attempt 2's readback
// finds nothing while attempt 1's call may still run: re-queued with the
// outcome open, rightly. At the age deadline attempt 1's window is over
// and no call of the task can still run; the readback finds nothing. The
// review must then not say that a call could still reach the provider
// (DESIGN §1.6: what is known is not reported as uncertain) — attempt 2's
// worker-recorded unknown is not a lapsed call.
func TestReadbackNotFoundAfterEveryCallEndedDoesNotSayACallMayStillRun(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{CallTimeout: 2 * time.Minute}) // deduplicates, reads back
		task := create(t, b, "readback-absent-calls-ended", func(n *ledger.NewTask) {
			n.MaxAge, n.MaxAttempts = 10*time.Minute, 5
		})
		deadline := time.UnixMilli(task.DeadlineMs)
		// Attempt 1: leased until deadline-2m30s; its call may run until
		// deadline-30s.
		b.clock.Set(deadline.Add(-3 * time.Minute))
		claim(t, b, task.TaskID)
		b.clock.Set(deadline.Add(-2*time.Minute - 20*time.Second))
		if s := handle(t, b.handler()); s.Requeued != 1 {
			t.Fatalf("attempt 1's expired lease: %+v, want it re-queued", s)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL)

		// Attempt 2 ends unknown at deadline-1m50s.
		b.clock.Set(deadline.Add(-2 * time.Minute))
		a2, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "worker-2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Set(deadline.Add(-time.Minute - 50*time.Second))
		markUnknownAfterA504(t, b, a2)

		// Its readback, while attempt 1's call may run: re-queued, open.
		b.clock.Set(deadline.Add(-time.Minute - 15*time.Second))
		if s := handle(t, b.handler()); s.Requeued != 1 {
			t.Fatalf("attempt 2's readback: %+v, want a re-queue", s)
		}
		if got := get(t, b, task.TaskID); got.OpenUnknownMs == 0 {
			t.Fatalf("attempt 2's readback found nothing while attempt 1's call may run: %+v, want the outcome open", got)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL)

		// Attempt 3 ends unknown at deadline-1m.
		b.clock.Set(deadline.Add(-time.Minute - 10*time.Second))
		a3, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "worker-3", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Set(deadline.Add(-time.Minute))
		markUnknownAfterA504(t, b, a3)

		// The age deadline: attempt 1's call ended at deadline-30s at the
		// latest; attempts 2 and 3 ended when their workers said so.
		b.clock.Set(deadline.Add(time.Second))
		var s reconciler.Summary
		for range 2 {
			s = handle(t, b.handler())
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview {
			t.Fatalf("past the age deadline: task %s (last run %+v), want parked", got.State, s)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		text := r.Summary + "\n" + strings.Join(r.Known, "\n") + "\n" + strings.Join(r.Uncertain, "\n")
		if strings.Contains(text, "could still reach the provider") {
			t.Fatalf("every call of the task had ended (attempt 1's window closed 30s before the deadline; attempts 2 and 3 ended by their workers' word) when the readback found nothing; the review says a call could still reach the provider:\n%s", text)
		}
	})
}
