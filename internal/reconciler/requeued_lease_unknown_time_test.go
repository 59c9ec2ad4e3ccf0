package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// readbackDown is the simulated provider with every readback failing (an
// outage: no answer).
type readbackDown struct{ *simulated.Provider }

func (readbackDown) Lookup(context.Context, string) (contract.Result, error) {
	return contract.Result{}, errors.New("readback unavailable")
}

// TestRequeuedLeaseParkedUnknownDatesTheUncertaintyByTheAttempt: an expired
// lease of a deduplicating provider is re-queued (its outcome unknown); no
// new attempt starts before the age deadline, so the relay moves the task
// to unknown for a readback (ledger.AwaitReadback), which fails; the task
// is parked unknown_outcome. DESIGN §1.6: the review tells the operator
// when the provider may have acted, to look it up. The only call that may
// have acted ran under the lease that expired; the review must not date it
// at the relay's move, when no worker held the task.
func TestRequeuedLeaseParkedUnknownDatesTheUncertaintyByTheAttempt(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "requeued-unknown-time", func(n *ledger.NewTask) { n.MaxAge = 30 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)
		b.clock.Set(deadline.Add(-20 * time.Minute))
		c := claim(t, b, task.TaskID) // the worker calls, then vanishes
		leaseEnd := time.UnixMilli(c.LeaseUntil).UTC()

		b.clock.Set(deadline.Add(-19 * time.Minute)) // lease expired, budget left
		if s := handle(t, b.handler()); s.Requeued != 1 {
			t.Fatalf("summary = %+v, want the expired lease re-queued", s)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL) // the re-sent message is not consumed in time

		b.clock.Set(deadline.Add(time.Minute))
		h := b.handler()
		h.Provider = readbackDown{b.prov}
		s := handle(t, h)
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewUnknownOutcome {
			t.Fatalf("task %s (%s; run %+v); want needs_review unknown_outcome (readback failed past the deadline)", got.State, got.ReviewReason, s)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		moved := deadline.Add(time.Minute).UTC().Format(time.RFC3339)
		if strings.Contains(r.Summary, moved) {
			t.Fatalf("the review dates the uncertainty at %s, the relay's move to unknown, 20 minutes after the only call's lease ended (%s):\n%s\n%s",
				moved, leaseEnd.Format(time.RFC3339), r.Summary, strings.Join(r.Known, "\n"))
		}
	})
}
