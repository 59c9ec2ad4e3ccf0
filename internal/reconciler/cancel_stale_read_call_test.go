package reconciler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A cancel is written from the task as the API read it (the refused plain
// cancel's ALL_OLD), and conditioned on its version only. A worker whose
// lease had lapsed in the table (paused, its renewals failing) may resume
// between that read and the cancel's write: MarkCallStarted renews the
// lapsed lease at the same version and the worker calls the provider. Its
// call started then, after the lease the cancel read had ended, so it may
// run until that start plus the call timeout: a "not found" read back
// before then is no evidence that the provider did not act, and the task
// must not end cancelled saying so — here the call does reach the
// provider.
func TestCancelFromAReadBeforeAResumedWorkersCallStartIsNotCancelledAsNotActed(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, LongDelay: 4 * time.Second, CallTimeout: time.Minute})
		task := create(t, b, "cancel-stale-read")
		claimed := claim(t, b, task.TaskID)
		b.clock.Advance(20 * time.Minute) // the lease lapsed; no reconciler ran meanwhile
		read := get(t, b, task.TaskID)    // the API's read (the plain cancel's refusal)

		// The worker resumes before the cancel's write: it marks its call
		// (renewing the lapsed lease) and calls the provider.
		markCall(t, b, claimed)
		done := startLongCall(t, b, task)
		// The write from the stale read is refused (the lease it read was
		// renewed since); the API then tries again from the task the
		// refusal returned, as here.
		cancelled, err := b.l.CancelRunning(ctx, read)
		var ce *ledger.ConflictError
		if !errors.As(err, &ce) || ce.Task == nil {
			t.Fatalf("cancel from a read whose lapsed lease was renewed since = %+v, %v; want a *ConflictError with the task", cancelled, err)
		}
		if cancelled, err = b.l.CancelRunning(ctx, ce.Task); err != nil {
			t.Fatal(err)
		}
		// Past Settle (30 s) after the cancel, which made the task due at
		// once (the lease it read had ended), well within the call timeout
		// (1 min) counted from the call's start.
		b.clock.Advance(31 * time.Second)
		s := handle(t, b.handler())
		if err := <-done; err != nil {
			t.Fatalf("the in-flight call failed: %v", err)
		}
		effects := b.prov.SideEffects(task.TaskID)
		if effects != 1 {
			t.Fatalf("provider side effects = %d, want the resumed worker's one generation", effects)
		}
		if got := get(t, b, task.TaskID); got.State == ledger.StateCancelled {
			t.Fatalf("the provider acted (%d side effect) in a call started after the cancel's read, yet the task ended %s (%s: %q); the cancel dated the uncertainty %v before the call's start; summary %+v",
				effects, got.State, got.ErrorClass, got.ErrorMessage, time.UnixMilli(cancelled.CallStartedMs).Sub(cancelled.UnknownSince()), s)
		}
	})
}
