package reconciler_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestTakenOverLeaseOutcomeStaysOpenThroughALaterError: with a provider
// that deduplicates and reads back (the default simulated one), attempt
// 1's call generates and its worker vanishes; a worker whose message
// arrives after the lease expired takes the task over (Claim with
// AllowTakeover, as internal/worker does for a deduplicating provider)
// instead of the reconciler re-queuing it, and attempt 2 is throttled.
// Attempt 1's outcome is as open as after the reconciler's re-queue
// (TestRequeuedExpiredLeaseAtItsDeadlineIsDecidedByReadback): at the age
// deadline the readback must decide it — the result the provider holds
// completes the task — and the task must never be parked saying nothing
// was generated (DESIGN §1.4, §1.6).
func TestTakenOverLeaseOutcomeStaysOpenThroughALaterError(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "takeover-open-outcome", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)
		b.clock.Set(deadline.Add(-3 * time.Minute))
		claim(t, b, task.TaskID)
		b.prov.Script(task.TaskID, simulated.AcceptLoseReply)
		if _, err := b.prov.Generate(ctx, contract.Request{OperationID: task.TaskID, Attempt: 1, Kind: task.Kind, Input: json.RawMessage(task.Input)}); err == nil {
			t.Fatal("scripted accept_lose_reply returned no error")
		}

		b.clock.Set(deadline.Add(-2 * time.Minute)) // lease expired 30 s ago; a message arrives first
		a2, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "worker-2", Lease: 30 * time.Second, AllowTakeover: true, TakeoverKind: task.Kind})
		if err != nil || a2.Attempts != 2 {
			t.Fatalf("takeover: %v (task %+v)", err, a2)
		}
		if _, err := b.l.ScheduleRetry(ctx, task.TaskID, a2.AssignmentVersion, deadline.Add(-30*time.Second), "throttled", "429 from the provider", ledger.InAttempt(a2)); err != nil {
			t.Fatal(err)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL)

		b.clock.Set(deadline.Add(time.Minute))
		s := handle(t, b.handler())
		got := get(t, b, task.TaskID)
		if got.State == ledger.StateCompleted && got.ReadbackAt != "" {
			return
		}
		text := ""
		if r, err := b.l.GetReview(ctx, task.TaskID); err == nil {
			text = r.Summary + "\n" + strings.Join(r.Known, "\n") + "\n" + strings.Join(r.Uncertain, "\n")
		}
		t.Fatalf("attempt 1 generated (the provider holds its result) before attempt 2 took over its expired lease; task %s (%s; run %+v), want completed from the readback; review:\n%s",
			got.State, got.ReviewReason, s, text)
	})
}
