package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A cancel while running fences a call still in flight: the fenced worker
// learns of the fence only at a renewal that reaches DynamoDB, and while
// its renewals fail (a slow or throttled table) the call runs on, up to the
// call timeout — as after an expired lease, for which docs/timing.md says
// the reconciler trusts "not found" only once the lease expiry plus the
// call timeout has passed. The call may be marked (a provider without
// idempotency keys; after the cancel the version is one past the mark) or
// never marked (a provider that deduplicates: a re-send would be harmless,
// but after a cancel nothing is re-sent, and the question is only whether
// the provider acted). Either way the task must not end cancelled saying
// the provider did not act while that call may still reach the provider —
// and here it does.
func TestCancelWhileRunningWithCallInFlightIsNotCancelledAsNotActed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts simulated.Options
	}{
		{"marked", simulated.Options{NoIdempotency: true}},
		{"deduplicating", simulated.Options{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				c.opts.LongDelay, c.opts.CallTimeout = 4*time.Second, time.Minute
				b := setup(t, e, c.opts)
				task := create(t, b, "cancel-inflight-"+c.name)
				if claimed := claim(t, b, task.TaskID); c.opts.NoIdempotency {
					markCall(t, b, claimed) // the worker marks the call it starts
				}
				done := startLongCall(t, b, task) // the fenced worker's call, still running (its renewals fail)
				if _, err := b.l.CancelRunning(ctx, get(t, b, task.TaskID)); err != nil {
					t.Fatal(err)
				}
				// Past the fenced lease (30 s) and Settle (30 s), well within
				// the call timeout (1 min) counted from the lease's end.
				b.clock.Advance(65 * time.Second)
				s := handle(t, b.handler())
				if err := <-done; err != nil {
					t.Fatalf("the in-flight call failed: %v", err)
				}
				effects := b.prov.SideEffects(task.TaskID)
				if effects != 1 {
					t.Fatalf("provider side effects = %d, want the in-flight call's one generation", effects)
				}
				if got := get(t, b, task.TaskID); got.State == ledger.StateCancelled {
					t.Fatalf("the provider acted (%d side effect) in a call in flight when the reconciler read back, yet the task ended %s (%s: %q); summary %+v",
						effects, got.State, got.ErrorClass, got.ErrorMessage, s)
				}
			})
		})
	}
}

// The wait for a cancelled marked call is bounded: once the fenced lease's
// end plus the call timeout has passed, no call of the fenced assignment
// can still reach the provider, so a "not found" read back then proves it
// did not act and the task ends cancelled. Before then the reconciler
// leaves the task unknown, neither cancelled nor parked.
func TestCancelWhileRunningWithMarkedCallIsCancelledOnceTheCallTimeoutHasPassed(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, CallTimeout: time.Minute})
		task := create(t, b, "cancel-marked-wait")
		markCall(t, b, claim(t, b, task.TaskID))
		if _, err := b.l.CancelRunning(ctx, get(t, b, task.TaskID)); err != nil {
			t.Fatal(err)
		}
		// Past the fenced lease (30 s) and Settle, within the call timeout.
		b.clock.Advance(65 * time.Second)
		s := handle(t, b.handler())
		if got := get(t, b, task.TaskID); got.State != ledger.StateUnknown || s.ReadbackInFlight != 1 {
			t.Fatalf("within the call timeout after the fenced lease: task %s, readbacks in flight %d (summary %+v); want it left unknown while the call may run",
				got.State, s.ReadbackInFlight, s)
		}
		// Past the fenced lease plus the call timeout (30 s + 1 min).
		b.clock.Advance(30 * time.Second)
		s = handle(t, b.handler())
		if got := get(t, b, task.TaskID); got.State != ledger.StateCancelled || got.ErrorClass != ledger.ErrorCancelledWhileRunning {
			t.Fatalf("past the fenced lease plus the call timeout: task %s (%s), summary %+v; want cancelled_while_running", got.State, got.ErrorClass, s)
		}
	})
}

// The wait never outlasts the age budget: a cancelled marked call that may
// still be in flight when the age budget ends is parked at the first run
// past the deadline (the task final within its budget plus one period),
// and its review does not claim that nothing was generated.
func TestCancelWhileRunningWithCallInFlightPastDeadlineIsParked(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, CallTimeout: time.Minute})
		task := create(t, b, "cancel-inflight-deadline", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)
		b.clock.Set(deadline.Add(-time.Second))
		markCall(t, b, claim(t, b, task.TaskID))
		if _, err := b.l.CancelRunning(ctx, get(t, b, task.TaskID)); err != nil {
			t.Fatal(err)
		}
		// Past the age deadline and the fenced lease, within the call timeout.
		b.clock.Set(deadline.Add(time.Minute))
		s := handle(t, b.handler())
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview {
			t.Fatalf("past the age deadline with the fenced call possibly in flight: task %s (%s), summary %+v; want parked",
				got.State, got.ErrorClass, s)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if known := strings.Join(r.Known, "\n"); strings.Contains(known, "nothing was generated") {
			t.Fatalf("the fenced call may still reach the provider, yet the review (%s) lists as known that nothing was generated:\n%s", r.Reason, known)
		}
		// The caller cancelled it: the review says so and offers no re-run.
		if r.Reason != ledger.ReviewUnknownOutcome || !strings.Contains(r.Summary, "cancelled by its caller") ||
			strings.Contains(strings.Join(r.SafeActions, "\n"), "review retry") {
			t.Fatalf("review %s %q, safe actions %q; want unknown_outcome saying the caller cancelled, without a retry", r.Reason, r.Summary, r.SafeActions)
		}
	})
}
