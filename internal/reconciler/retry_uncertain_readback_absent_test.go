package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A deduplicating provider's attempt ends at its worker with an unknown
// outcome (the connection reset before any reply), and the worker retries
// it under the same key (ScheduleRetryUncertain): its call had ended when
// the worker wrote that, so no call of it can still reach the provider.
// The age deadline passes before the retry runs; the relay reads the
// provider back, which credibly finds no record of the operation. That
// answer settles the question — as it does when the worker records the
// outcome unknown itself (MarkUnknown) — and the park must say nothing was
// generated, not that a call "could still reach the provider" until the
// worker's write plus the call timeout (DESIGN §1.4, §1.6: no false
// uncertainty, no false statement in the review).
func TestWorkerRetriedUncertainAttemptsEndedCallOpensNoWindowForTheReadback(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{CallTimeout: time.Minute})
		task := create(t, b, "retry-uncertain-readback-absent", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)

		b.clock.Set(deadline.Add(-31 * time.Second))
		c1 := claim(t, b, task.TaskID)
		b.clock.Set(deadline.Add(-29 * time.Second)) // the call returned: connection reset, nothing reached the provider
		if _, err := b.l.ScheduleRetryUncertain(ctx, task.TaskID, c1.AssignmentVersion, deadline.Add(-25*time.Second),
			"connection reset (the provider deduplicates by operation id, so it is re-sent under the same key)", ledger.InAttempt(c1)); err != nil {
			t.Fatal(err)
		}

		b.clock.Set(deadline.Add(10 * time.Second)) // the retry never ran; 39 s after the worker's write, within the call timeout
		s := handle(t, b.handler())
		if n := b.prov.SideEffects(task.TaskID); n != 0 {
			t.Fatalf("setup: provider side effects = %d, want none", n)
		}
		got := get(t, b, task.TaskID)
		r, err := b.l.GetReview(ctx, task.TaskID)
		if got.State != ledger.StateNeedsReview || err != nil || r == nil || r.Reason != ledger.ReviewBudgetExhausted {
			t.Fatalf("task %s (run %+v), review %+v, %v; want parked budget_exhausted", got.State, s, r, err)
		}
		known := strings.Join(r.Known, "\n")
		if strings.Contains(known, "could still reach the provider") || !strings.Contains(r.Summary+"\n"+known, "nothing was generated") {
			t.Fatalf("the worker's call had ended when it recorded the outcome unknown and the readback found no record, yet the review (run %+v) does not say nothing was generated:\n%s\n%s\n%s",
				s, r.Summary, known, strings.Join(r.Uncertain, "\n"))
		}
	})
}
