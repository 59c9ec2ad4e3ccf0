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

// A cancel while running fences a marked call of a provider without
// idempotency (readback only). The fenced worker learns of the fence only
// at a renewal that reaches DynamoDB; while its renewals fail (a slow or
// throttled table) the call runs on, up to the call timeout — the case
// docs/timing.md names for an expired lease: "for a marked call the
// reconciler trusts 'not found' only once the lease expiry plus the call
// timeout has passed". After a cancel the version is one past the
// call-start mark, so the reconciler takes a "not found" read back while
// that call is still in flight as proof that the provider did not act and
// ends the task cancelled; the call then generates. The task must not say
// cancelled-because-the-provider-did-not-act while a call of the fenced
// assignment may still reach the provider.
func TestCancelWhileRunningWithCallInFlightIsNotCancelledAsNotActed(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, LongDelay: 4 * time.Second, CallTimeout: time.Minute})
		task := create(t, b, "cancel-inflight-readback")
		markCall(t, b, claim(t, b, task.TaskID)) // the worker marks the call it starts
		b.prov.Script(task.TaskID, simulated.Long)
		done := make(chan error, 1)
		go func() { // the fenced worker's call, still running (its renewals fail)
			_, err := b.prov.Generate(ctx, contract.Request{OperationID: task.TaskID, Attempt: 1, Kind: task.Kind, Input: json.RawMessage(task.Input)})
			done <- err
		}()
		for started := false; !started; { // await the call's start at the provider
			started = len(b.prov.Events(task.TaskID)) > 0
			if !started {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if _, err := b.l.CancelRunning(ctx, get(t, b, task.TaskID)); err != nil {
			t.Fatal(err)
		}
		// Past the fenced lease (30 s) and Settle (30 s), well within the
		// call timeout (1 min) counted from the lease's end.
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
	})
}
