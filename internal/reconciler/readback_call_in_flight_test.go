package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestExpiredLeasePastDeadlineWithCallInFlightIsNotCalledAbsent: the
// worker lets a call go on after its lease lapsed (heartbeat.go: "renewals
// stop, the call goes on so its result can settle the task"), and past the
// age deadline the reconciler resolves an expired lease by readback in the
// same run, without Settle. A readback made while the call is still in
// flight answers "not found", and then the call finishes and the provider
// (no idempotency, readback: the soak's plain+readback mode) has
// generated. So the parked task's review must not list as KNOWN that "the
// provider's readback ... credibly found no record of it: nothing was
// generated": a not-found readback is credible only once no call of the
// lapsed assignment can still be running (lease_until + the call timeout).
// (The summary hedges with "may have reached the provider"; the Known
// list must be true as well.)
func TestExpiredLeasePastDeadlineWithCallInFlightIsNotCalledAbsent(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, LongDelay: 4 * time.Second, CallTimeout: time.Minute})
		task := create(t, b, "inflight-readback", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)
		b.clock.Set(deadline.Add(-time.Second))
		markCall(t, b, claim(t, b, task.TaskID)) // the worker marks the call it starts
		done := startLongCall(t, b, task)        // the lapsed worker's call, still running
		b.clock.Set(deadline.Add(time.Minute))   // lease (30 s) lapsed, age budget over
		s := handle(t, b.handler())
		if err := <-done; err != nil {
			t.Fatalf("the in-flight call failed: %v", err)
		}
		effects := b.prov.SideEffects(task.TaskID)
		if effects != 1 {
			t.Fatalf("provider side effects = %d, want the in-flight call's one generation", effects)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview {
			t.Fatalf("task %s (summary %+v), want parked", got.State, s)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		text := r.Summary + "\n" + strings.Join(r.Known, "\n") + "\n" + strings.Join(r.Uncertain, "\n") + "\n" + strings.Join(r.SafeActions, "\n")
		// The summary hedges ("may have reached the provider"), but what
		// the review lists as known must be true.
		if known := strings.Join(r.Known, "\n"); strings.Contains(known, "nothing was generated") {
			t.Fatalf("the provider generated (%d side effect) in a call in flight when the reconciler read back, yet the review (%s, summary %+v) lists as known that nothing was generated:\n%s",
				effects, r.Reason, s, text)
		}
	})
}
