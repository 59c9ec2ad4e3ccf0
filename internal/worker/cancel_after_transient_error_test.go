package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestTransientErrorThenCancelIsLeftToTheReconciler: class Transient does
// not mean "the provider refused the call, so it did not act": it is also
// a 5xx after the request was sent (retrypolicy: "a provider whose 5xx may
// hide an accepted request must wrap with Uncertain" — the generic rule
// does not), an unclassified error, Bedrock's malformed_model_output
// (generated and billed, then Retryable). The worker's own spend accounting
// says so (spend.go: "Anything else that was sent — a 5xx, an unclassified
// or cancelled call … — may have generated", and charges the reservation;
// see actsThen502 in TestServerErrorAfterActingIsCharged). So neither a
// transient error after a cancel of that attempt nor, on the last attempt,
// the budget park (parkRefused) ends the task cancelled like a rejected
// input.
//
// Sequence (provider without idempotency keys; a gateway in front of it
// answers 502 after the model generated — actsThen502):
//
//	claim (v), call-start mark, call: the model generates (1 side
//	effect), the gateway answers 502 (Retryable → Transient);
//	the caller cancels (CancelRunning: unknown at v+1, cancel_version v)
//	after the reply and before the worker's settling write;
//	worker: ScheduleRetry (or, last attempt, the budget park) refused by
//	the cancel → left to the reconciler.
//
// The reconciler's cancel rule decides (ledger.CancelRunning's contract:
// "completed if … a readback finds the result, or parked for review when
// that cannot be known"): with a readback it finds the generation and
// saves it (completed); without one it parks unknown_outcome saying the
// provider may have acted. Ended cancelled by the worker, the generated
// (billed) result would be lost for good (promise 1/3) and the record
// would say the provider did not act while it did (§1.6), against the
// spend ledger's charge.
func TestTransientErrorThenCancelIsLeftToTheReconciler(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		readback    bool
		maxAttempts int
	}{
		{"readback", true, 0},
		{"readback_last_attempt", true, 1},
		{"no_readback", false, 0},
		{"no_readback_last_attempt", false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: !c.readback}))
				ctx := context.Background()
				b.h.Provider = &actsThen502{inner: b.sim}
				task := b.create(t, "cancel-5xx-"+c.name, prompt, func(n *ledger.NewTask) {
					if c.maxAttempts > 0 {
						n.MaxAttempts = c.maxAttempts
					}
				})
				raced := raceTheSave(t, b, task.TaskID, "cancel")
				b.send(t, task.TaskID)
				handle(t, b.h, ctx, b.deliver(t, 1, 120))
				raced()
				if n := b.sim.SideEffects(task.TaskID); n != 1 {
					t.Fatalf("setup: %d side effects; want the one generation behind the 502", n)
				}
				afterWorker := b.get(t, task.TaskID)
				// The reconciler's cancel rule decides what is left to it.
				got := b.settleByReconciler(t, task.TaskID)
				if got.State == ledger.StateCancelled {
					t.Fatalf("the model generated (1 side effect) and the gateway answered 502 (a transient class: not a refusal — spend.go charges it as possibly generated); a cancel landed before the worker's write, and the worker ended the task cancelled (after the worker: %s, error %q: %q) — the generation %s",
						afterWorker.State, got.ErrorClass, got.ErrorMessage,
						map[bool]string{true: "could have been read back and saved (the reconciler's cancel rule completes it from the readback), and is lost", false: "is recorded as never having happened, where the reconciler would park it unknown_outcome (the provider may have acted)"}[c.readback])
				}
				if c.readback && got.State != ledger.StateCompleted {
					t.Fatalf("the provider's readback holds the generation; want completed from it, got %s (%s) %q", got.State, got.ReviewReason, got.ErrorMessage)
				}
				if !c.readback {
					r, err := b.l.GetReview(ctx, task.TaskID)
					if err != nil || r.Reason != ledger.ReviewUnknownOutcome || !strings.Contains(strings.Join(r.Uncertain, " "), "performed") {
						t.Fatalf("want the task parked unknown_outcome (the provider may have acted); got %s, review %+v, %v", got.State, r, err)
					}
				}
			})
		})
	}
}
