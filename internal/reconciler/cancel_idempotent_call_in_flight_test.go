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

// A cancel while running fences a call to a provider that honours
// idempotency keys and reads back. The worker does not mark such calls, so
// the reconciler cannot see that one started; the fenced worker's renewals
// fail and its call runs on, up to the call timeout, exactly as for a
// marked call. Deduplication makes a re-send harmless, but after a cancel
// nothing is re-sent: the question is only whether the provider acted, and
// a "not found" read back while the call is in flight does not answer it.
// The task must not end cancelled saying the provider did not act while a
// call of the fenced assignment may still reach the provider and does.
func TestCancelWhileRunningWithIdempotentCallInFlightIsNotCancelledAsNotActed(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{LongDelay: 4 * time.Second, CallTimeout: time.Minute})
		task := create(t, b, "cancel-inflight-idempotent")
		claim(t, b, task.TaskID) // no call-start mark: the provider deduplicates
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
