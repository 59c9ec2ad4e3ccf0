package reconciler_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// TestReadbackNotFoundWhileAnEarlierLapsedCallMayRunKeepsItsOutcomeOpen:
// with a provider that deduplicates and reads back (the default simulated
// one, openai with HonoursIdempotency), attempt 1's worker is in its call
// when its renewals stop getting through; the reconciler re-queues the
// expired lease (its outcome stays open: open_unknown_ms). Attempt 2's call
// ends with a gateway's 504 carrying a Retry-After that reaches past the
// age deadline: the worker's nextRetry finds no budget for the backoff and
// marks the attempt unknown, though by the reconciler's measure (now before
// the deadline) the budget is not spent. Settle later the readback says
// "not found" — while attempt 1's call, started under its lease, may run on
// for the call timeout after that lease's end. The re-queue that follows
// must not settle attempt 1's outcome: its call then generates, no worker
// claims the task before the age deadline (a backlog), and the park must
// not say that nothing was generated (DESIGN §1.4, §1.6) — the readback
// that decides an open outcome would find the result.
func TestReadbackNotFoundWhileAnEarlierLapsedCallMayRunKeepsItsOutcomeOpen(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{CallTimeout: 2 * time.Minute}) // deduplicates, reads back
		task := create(t, b, "readback-absent-lapsed-call", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)

		b.clock.Set(deadline.Add(-3 * time.Minute))
		a1 := claim(t, b, task.TaskID) // lease until deadline-2m30s; its call starts and runs on past it

		b.clock.Set(deadline.Add(-2*time.Minute - 20*time.Second))
		if s := handle(t, b.handler()); s.Requeued != 1 {
			t.Fatalf("first run: %+v, want attempt 1's expired lease re-queued", s)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL)

		b.clock.Set(deadline.Add(-2*time.Minute - 15*time.Second))
		a2, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "worker-2", Lease: 30 * time.Second})
		if err != nil || a2.Attempts != 2 || a2.OpenUnknownMs == 0 {
			t.Fatalf("attempt 2's claim: %v (task %+v), want attempt 2 with attempt 1's outcome open", err, a2)
		}
		// Attempt 2's call: a gateway gave up waiting and asks for 3
		// minutes, which do not fit before the deadline: MarkUnknown.
		markUnknownAfterA504(t, b, a2)

		// Settle over; attempt 1's call may run until its lease's end plus
		// the 2 min call timeout (deadline-30s).
		b.clock.Set(deadline.Add(-time.Minute - 40*time.Second))
		s := handle(t, b.handler())
		e.DrainTaskIDs(t, e.Names.TaskQueueURL) // the message waits in a backlog: no worker claims it in time

		// Attempt 1's call, sent under its lease, generates now.
		b.clock.Set(deadline.Add(-time.Minute - 35*time.Second))
		if _, err := b.prov.Generate(ctx, contract.Request{OperationID: task.TaskID, Attempt: a1.Attempts, Kind: task.Kind, Input: json.RawMessage(task.Input)}); err != nil {
			t.Fatal(err)
		}

		b.clock.Set(deadline.Add(time.Minute))
		for range 2 { // the relay, and the readback it may ask for
			s = handle(t, b.handler())
		}
		got := get(t, b, task.TaskID)
		if got.State == ledger.StateCompleted {
			return
		}
		text := ""
		if r, err := b.l.GetReview(ctx, task.TaskID); err == nil {
			text = r.Summary + "\n" + strings.Join(r.Known, "\n") + "\n" + strings.Join(r.Uncertain, "\n")
		}
		if got.State == ledger.StateNeedsReview && !strings.Contains(text, "nothing was generated") && strings.Contains(strings.ToLower(text), "may have") {
			return
		}
		t.Fatalf("attempt 1's lapsed call generated (the provider holds its result) after a readback that found nothing while it could still run; task %s (%s; last run %+v), want completed from the readback or a review saying the provider may have acted; review:\n%s",
			got.State, got.ReviewReason, s, text)
	})
}

// markUnknownAfterA504 ends attempt a as the worker does after a gateway's
// 504 (openai maps it to retrypolicy.Uncertain) asking for 3 minutes: a
// retry is repeatable (the provider deduplicates) but nextRetry's backoff
// does not fit before the task's age deadline, so MarkUnknown — while by
// the reconciler's measure (now before the deadline) budget is left.
func markUnknownAfterA504(t *testing.T, b *bundle, a *ledger.Task) {
	t.Helper()
	perr := retrypolicy.Uncertain(fmt.Errorf("gateway: %w", &retrypolicy.StatusError{StatusCode: 504, RetryAfter: 3 * time.Minute}))
	c := retrypolicy.Classify(perr)
	if c.Class != retrypolicy.UnknownOutcome || retrypolicy.Default().NextRetryAt(b.clock.Now(), a.Attempts-1, c.RetryAfter).Before(time.UnixMilli(a.DeadlineMs)) {
		t.Fatalf("classification %+v: want an unknown outcome whose next retry cannot start before the deadline", c)
	}
	if _, err := b.l.MarkUnknown(ctx, a.TaskID, a.AssignmentVersion, c.Class.String(), "the provider may have acted: "+perr.Error(), ledger.InAttempt(a)); err != nil {
		t.Fatal(err)
	}
}
