package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// retriedAfterCancelPark takes a task through a cancel while running whose
// outcome could not be read back (parked unknown_outcome), an operator's
// "retry" of that park, and a new claim: the returned assignment is the
// operator's retry, which no cancel has fenced.
func retriedAfterCancelPark(t *testing.T, b *bundle, key string) *ledger.Task {
	t.Helper()
	task := create(t, b, key)
	c := claim(t, b, task.TaskID)
	markCall(t, b, c) // the cancelled attempt's call had started
	if _, err := b.l.CancelRunning(ctx, get(t, b, task.TaskID)); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(10 * time.Minute) // past the lease, Settle and the call timeout
	handle(t, b.handler())
	if got := get(t, b, task.TaskID); got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewUnknownOutcome {
		t.Fatalf("a cancel while running with no readback left the task %s (%s), want needs_review (%s)", got.State, got.ReviewReason, ledger.ReviewUnknownOutcome)
	}
	if _, _, _, err := b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops@example.com", Note: "the caller wants it after all"}); err != nil {
		t.Fatal(err)
	}
	return claim(t, b, task.TaskID)
}

// An operator's "retry" of a task parked after a cancel while running
// decides that cancel: the retried attempt is a new one, which no cancel
// fenced. When its own call starts and its outcome becomes unknown, the
// reconciler must treat it like any uncertain attempt of a call that may
// have acted — parked unknown_outcome with no readback — and not end it
// cancelled as "cancelled before its provider call started": the call
// under the retried assignment did start, and the provider may have acted.
func TestRetriedAttemptAfterCancelParkIsNotEndedCancelledWhenItsCallStarted(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		c := retriedAfterCancelPark(t, b, "retried-after-cancel-started")
		markCall(t, b, c) // the retried attempt's call starts…
		if _, err := b.l.MarkUnknown(ctx, c.TaskID, c.AssignmentVersion, "unknown_outcome", "reply lost"); err != nil {
			t.Fatal(err) // …and its reply is lost
		}
		b.clock.Advance(time.Minute) // past Settle
		s := handle(t, b.handler())
		got := get(t, b, c.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewUnknownOutcome {
			t.Fatalf("the retried attempt's uncertain call (call started at version %d) left the task %s (%s: %q), want needs_review (%s); summary %+v",
				c.AssignmentVersion, got.State, got.ErrorClass, got.ErrorMessage, ledger.ReviewUnknownOutcome, s)
		}
		// Its review explains the retried attempt, not the cancel the
		// operator already decided: retry is offered again, and nothing
		// says the caller cancelled it.
		r, err := b.l.GetReview(ctx, c.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		text := r.Summary + "\n" + strings.Join(r.Known, "\n") + "\n" + strings.Join(r.SafeActions, "\n")
		if strings.Contains(text, "cancel") || !strings.Contains(strings.Join(r.SafeActions, "\n"), "review retry") {
			t.Fatalf("review of the retried attempt:\n%s", text)
		}
	})
}

// With a readback, a retried attempt whose outcome is unknown and which the
// provider never saw is re-queued (its budget left), as any uncertain
// attempt the provider did not act on — not ended cancelled by the cancel
// the operator's retry already decided.
func TestRetriedAttemptAfterCancelParkIsRequeuedWhenReadbackFindsNothing(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		c := retriedAfterCancelPark(t, b, "retried-after-cancel-absent")
		// The deployment now has a provider that reads back (the park
		// needed one without); it has no record of the operation.
		b.prov = simulated.New(simulated.Options{NoIdempotency: true, Clock: b.clock.Now})
		if _, err := b.l.MarkUnknown(ctx, c.TaskID, c.AssignmentVersion, "unknown_outcome", "connection reset before the send"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
		s := handle(t, b.handler())
		if got := get(t, b, c.TaskID); got.State != ledger.StateQueued {
			t.Fatalf("the retried attempt the provider never saw left the task %s (%s: %q), want queued; summary %+v", got.State, got.ErrorClass, got.ErrorMessage, s)
		}
	})
}

// A retry-safe generation's retried attempt (after an operator's retry of
// a cancel's park) whose outcome is unknown is retried while its budget
// lasts, like any uncertain retry-safe attempt: the cancel was decided by
// the operator, so it is not ended cancelled and charged.
func TestRetriedRetrySafeAttemptAfterCancelParkIsRetried(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		c := retriedAfterCancelPark(t, b, "retried-after-cancel-retry-safe") // parked by an effect deployment
		if _, err := b.l.MarkUnknown(ctx, c.TaskID, c.AssignmentVersion, "unknown_outcome", "reply lost"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
		h := b.handler()
		h.RetrySafeGeneration = true
		s := handle(t, h)
		if got := get(t, b, c.TaskID); got.State != ledger.StateQueued {
			t.Fatalf("the retried retry-safe attempt left the task %s (%s: %q), want queued; summary %+v", got.State, got.ErrorClass, got.ErrorMessage, s)
		}
	})
}
