package reconciler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestExpiredLeaseAtTheAgeDeadlineIsFinalWithinOnePeriod: DESIGN §1.1
// promises every task final "within its age budget plus one reconciler
// period". A Bedrock-like provider (no
// idempotency, no readback); the last claim is made one second before the
// age deadline by a worker that then vanishes (lease 30 s). The reconciler
// runs every minute; whatever the phase of its schedule, the task must be
// final at the first run at or after deadline + 60 s. An expired lease past
// the deadline therefore goes running → unknown and is resolved (read back
// or parked) in the same run, without the Settle wait.
func TestExpiredLeaseAtTheAgeDeadlineIsFinalWithinOnePeriod(t *testing.T) {
	t.Parallel()
	const period = time.Minute
	for _, phase := range []time.Duration{10 * time.Second, 40 * time.Second} {
		for _, called := range []bool{false, true} {
			name := phase.String() + "/claim_only"
			if called {
				name = phase.String() + "/call_started"
			}
			t.Run(name, func(t *testing.T) {
				testenv.Each(t, func(t *testing.T, e *testenv.Env) {
					b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
					task := create(t, b, "deadline-"+name, func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
					deadline := time.UnixMilli(task.DeadlineMs)
					b.clock.Set(deadline.Add(-time.Second))
					claimed := claim(t, b, task.TaskID) // the worker vanishes after this claim…
					if called {
						markCall(t, b, claimed) // …or during its call
					}
					// Reconciler runs at deadline+phase, +phase+period, ...
					// until the first run at or after deadline+period.
					at := deadline.Add(phase)
					var got *ledger.Task
					for {
						b.clock.Set(at)
						handle(t, b.handler())
						got = get(t, b, task.TaskID)
						if !got.State.Live() || !at.Before(deadline.Add(period)) {
							break
						}
						at = at.Add(period)
					}
					if got.State.Live() {
						t.Fatalf("at deadline+%s (first run at or after deadline+%s) the task is still %s; the promise is final within the age budget plus one reconciler period",
							at.Sub(deadline), period, got.State)
					}
					want := ledger.ReviewBudgetExhausted // no call started: nothing uncertain
					if called {
						want = ledger.ReviewUnknownOutcome
					}
					if got.ReviewReason != want {
						t.Fatalf("parked %s, want %s", got.ReviewReason, want)
					}
				})
			})
		}
	}
}

// TestExpiredLeasePastDeadlineIsReadBackInTheSameRun: with a provider that
// can read back, an expired lease past the age deadline is moved to
// unknown and read back in the same run, without waiting Settle: the
// provider had generated, so the task completes with its result at once.
func TestExpiredLeasePastDeadlineIsReadBackInTheSameRun(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "deadline-readback", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)
		b.clock.Set(deadline.Add(-time.Second))
		claim(t, b, task.TaskID)
		b.prov.Script(task.TaskID, simulated.AcceptLoseReply)
		if _, err := b.prov.Generate(ctx, contract.Request{OperationID: task.TaskID, Attempt: 1, Kind: task.Kind, Input: json.RawMessage(task.Input)}); err == nil {
			t.Fatal("scripted accept_lose_reply returned no error")
		}
		rec, _ := b.prov.Record(task.TaskID)
		b.clock.Set(deadline.Add(time.Minute))
		s := handle(t, b.handler())
		if s.ExpiredToUnknown != 1 || s.ReadbackFound != 1 || s.Completed != 1 {
			t.Fatalf("summary = %+v, want expired to unknown and completed from readback in one run", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateCompleted || got.Result != string(rec.Result.Output) || got.ReadbackAt == "" {
			t.Fatalf("task = %s, readback_at %q, result match %v", got.State, got.ReadbackAt, got.Result == string(rec.Result.Output))
		}
	})
}
