package reconciler_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestReadbackNotFoundWaitsForTheLatestLapsedCallWhenAnEarlierOutcomeIsOpen:
// a provider that deduplicates and reads back, for a kind the deployment
// declares to have side effects (Handler.SideEffects), so an expired lease
// goes to unknown even with budget left. Attempt 1's lease lapses; its
// readback finds nothing while its call may still run, so the task is
// re-queued with its outcome open (since attempt 1's lease end). Attempt
// 2's lease lapses later, the same way: its readback finds nothing while
// its call may run until its own lease's end plus the call timeout — past
// the age deadline — and the task is re-queued again; open_unknown_ms
// keeps attempt 1's time, and neither lapse is in the attempt history
// (ExpireToUnknown, RequeueCallMayRun record none). At the age deadline
// the readback again finds nothing, while attempt 2's call may still run:
// the park must not say that nothing was generated (DESIGN §1.4, §1.6) —
// attempt 2's call then generates.
func TestReadbackNotFoundWaitsForTheLatestLapsedCallWhenAnEarlierOutcomeIsOpen(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{CallTimeout: 2 * time.Minute}) // deduplicates, reads back
		handler := func() *reconciler.Handler {
			h := b.handler()
			h.SideEffects = func(string) bool { return true } // an expired lease goes to unknown, budget or not
			return h
		}
		task := create(t, b, "readback-absent-second-lapse", func(n *ledger.NewTask) {
			n.MaxAge, n.MaxAttempts = 10*time.Minute, 5
		})
		deadline := time.UnixMilli(task.DeadlineMs)

		// Attempt 1: leased until deadline-3m30s; its call may run until
		// deadline-1m30s.
		b.clock.Set(deadline.Add(-4 * time.Minute))
		claim(t, b, task.TaskID)
		b.clock.Set(deadline.Add(-3*time.Minute - 20*time.Second))
		if s := handle(t, handler()); s.ExpiredToUnknown != 1 {
			t.Fatalf("attempt 1's expired lease: %+v, want it moved to unknown", s)
		}
		b.clock.Set(deadline.Add(-2*time.Minute - 45*time.Second))
		if s := handle(t, handler()); s.Requeued != 1 {
			t.Fatalf("attempt 1's readback: %+v, want a re-queue", s)
		}
		if got := get(t, b, task.TaskID); got.OpenUnknownMs == 0 {
			t.Fatalf("after attempt 1's readback found nothing while its call may run: %+v, want its outcome open", got)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL)

		// Attempt 2: leased until deadline-1m50s; its call starts under
		// the lease and may run until deadline+10s.
		b.clock.Set(deadline.Add(-2*time.Minute - 20*time.Second))
		a2, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "worker-2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Set(deadline.Add(-time.Minute - 40*time.Second))
		if s := handle(t, handler()); s.ExpiredToUnknown != 1 {
			t.Fatalf("attempt 2's expired lease: %+v, want it moved to unknown", s)
		}
		b.clock.Set(deadline.Add(-time.Minute - 5*time.Second))
		if s := handle(t, handler()); s.Requeued != 1 {
			t.Fatalf("attempt 2's readback: %+v, want a re-queue", s)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL) // a backlog: no worker claims it before the deadline

		// The age deadline: attempt 1's call has ended (deadline-1m30s),
		// attempt 2's may still run (until deadline+10s).
		b.clock.Set(deadline.Add(time.Second))
		var s reconciler.Summary
		for range 2 {
			s = handle(t, handler())
		}
		got := get(t, b, task.TaskID)

		// Attempt 2's call, sent under its lease, generates now.
		b.clock.Set(deadline.Add(5 * time.Second))
		if _, err := b.prov.Generate(ctx, contract.Request{OperationID: task.TaskID, Attempt: a2.Attempts, Kind: task.Kind, Input: json.RawMessage(task.Input)}); err != nil {
			t.Fatal(err)
		}
		if got.State != ledger.StateNeedsReview {
			t.Fatalf("past the age deadline: task %s (last run %+v), want parked", got.State, s)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		text := r.Summary + "\n" + strings.Join(r.Known, "\n") + "\n" + strings.Join(r.Uncertain, "\n")
		if strings.Contains(text, "nothing was generated") {
			t.Fatalf("attempt 2's lapsed call could still reach the provider (until its lease's end plus the call timeout) when the readback found nothing, and then generated; the review says nothing was generated:\n%s", text)
		}
	})
}
