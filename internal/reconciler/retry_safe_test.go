package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A retry-safe generation's expired lease is a retry, not an uncertainty:
// with a provider that neither deduplicates nor reads back, the effect
// class decides between re-queuing it (retry-safe: a second generation
// costs only money) and moving it to unknown for a person (effect).
func TestExpiredLeaseOfRetrySafeGenerationIsRequeued(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		for _, c := range []struct {
			name      string
			retrySafe bool
			want      ledger.State
		}{
			{"retry-safe", true, ledger.StateQueued},
			{"effect", false, ledger.StateUnknown},
		} {
			b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
			task := create(t, b, "expired-"+c.name)
			cl := claim(t, b, task.TaskID)
			markCall(t, b, cl) // a call was started: it may have generated
			b.clock.Advance(time.Minute)
			h := b.handler()
			h.RetrySafeGeneration = c.retrySafe
			handle(t, h)
			got := get(t, b, task.TaskID)
			if got.State != c.want {
				t.Errorf("%s: expired lease left the task %s, want %s", c.name, got.State, c.want)
			}
			if c.retrySafe && got.ReviewReason != "" {
				t.Errorf("%s: review reason %q on a re-queued task", c.name, got.ReviewReason)
			}
		}
	})
}

// An uncertain attempt of a retry-safe generation (the worker recorded its
// outcome unknown) is never parked unknown_outcome: with no readback it is
// re-queued while budgets last, its error saying the outcome was not learnt
// (not that a readback found nothing: none ran), and parked
// budget_exhausted after.
func TestUnknownRetrySafeGenerationIsRetriedThenParkedBudgetExhausted(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		h := b.handler()
		h.RetrySafeGeneration = true

		task := create(t, b, "unknown-retry", func(n *ledger.NewTask) { n.MaxAttempts = 2 })
		c := claim(t, b, task.TaskID)
		if _, err := b.l.MarkUnknown(ctx, task.TaskID, c.AssignmentVersion, "unknown_outcome", "reply lost"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute) // past Settle
		handle(t, h)
		if got := get(t, b, task.TaskID); got.State != ledger.StateQueued || got.ErrorClass != ledger.ErrorUncertainRetried {
			t.Fatalf("first uncertain attempt left the task %s (%s, error %s: %s), want queued (%s)",
				got.State, got.ReviewReason, got.ErrorClass, got.ErrorMessage, ledger.ErrorUncertainRetried)
		}

		c = claim(t, b, task.TaskID) // the second and last attempt
		if _, err := b.l.MarkUnknown(ctx, task.TaskID, c.AssignmentVersion, "unknown_outcome", "reply lost"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
		handle(t, h)
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted {
			t.Fatalf("last uncertain attempt left the task %s (%s), want needs_review (%s)", got.State, got.ReviewReason, ledger.ReviewBudgetExhausted)
		}
	})
}

// A cancel while running of a retry-safe generation needs no readback: the
// reconciler ends it cancelled the first time it sees it, where an effect
// with no readback is parked for a person.
func TestCancelledRetrySafeGenerationEndsCancelled(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		for _, c := range []struct {
			name      string
			retrySafe bool
			want      ledger.State
		}{
			{"retry-safe", true, ledger.StateCancelled},
			{"effect", false, ledger.StateNeedsReview},
		} {
			b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
			task := create(t, b, "cancel-"+c.name)
			cl := claim(t, b, task.TaskID)
			markCall(t, b, cl) // a call was started: it may have generated
			if _, err := b.l.CancelRunning(ctx, get(t, b, task.TaskID)); err != nil {
				t.Fatal(err)
			}
			b.clock.Advance(10 * time.Minute) // past the lease, Settle and the call timeout
			h := b.handler()
			h.RetrySafeGeneration = c.retrySafe
			handle(t, h)
			if got := get(t, b, task.TaskID); got.State != c.want {
				t.Errorf("%s: cancelled running task ended %s (%s), want %s", c.name, got.State, got.ReviewReason, c.want)
			}
		}
	})
}

// The last attempt of a retry-safe generation whose lease expired is
// parked budget_exhausted at once, with a review that names the policy and
// claims no uncertainty — even with a provider that offers Lookup but
// always answers it has no readback.
func TestExpiredLastLeaseOfRetrySafeGenerationIsParkedWithoutUncertainty(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		task := create(t, b, "retry-safe-last", func(n *ledger.NewTask) { n.MaxAttempts = 1 })
		claim(t, b, task.TaskID)
		b.clock.Advance(time.Minute)
		h := b.handler()
		h.RetrySafeGeneration = true
		handle(t, h)
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted {
			t.Fatalf("expired last lease left the task %s (%s), want needs_review (%s)", got.State, got.ReviewReason, ledger.ReviewBudgetExhausted)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ToLower(r.Summary + "\n" + strings.Join(r.Uncertain, "\n"))
		if strings.Contains(text, "may have") || !strings.Contains(text, "retry-safe") {
			t.Fatalf("review of a retry-safe park:\n%s", text)
		}
	})
}
