package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestNoUnmarkedCallAfterTheLeaseWasParkedAbsent: a provider that
// deduplicates by operation id is called without a call-start mark, so
// nothing on the task says whether a call started. The reconciler trusts a
// readback's "not found" once no call of the expired assignment can still
// reach the provider — the lease's end plus the call timeout — which holds
// only if every call starts inside its lease. A worker that is slow between
// its claim and its call (here it stops after the claim, as a GC pause, a
// slow S3 read or an admission wait would stop it) finds, when it goes on,
// its lease expired, the task read back "not found" after that window and
// parked budget_exhausted saying nothing was generated. If it calls the
// provider then, the provider generates and the review's "nothing was
// generated" is false (the model test's "false certainty", found in its
// idempotent mode). A call must not start outside its lease: the worker
// renews first, and the refused renewal stops it.
func TestNoUnmarkedCallAfterTheLeaseWasParkedAbsent(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		const callTimeout = time.Minute
		b := setup(t, e, withSim(simulated.Options{CallTimeout: callTimeout})) // deduplicates, reads back
		b.h.CallTimeout = callTimeout
		task := b.create(t, "slow-claim-unmarked", prompt, func(n *ledger.NewTask) { n.MaxAttempts = 1 })

		var (
			expired, parked reconciler.Summary
			recErr          error
		)
		b.h.Hooks = &worker.Hooks{AfterClaim: func(context.Context, string) error {
			// The worker stops after its claim. Its lease (30 s) and the
			// grace pass: the reconciler expires it to unknown (no attempt
			// left). Past the lease's end plus the call timeout and Settle,
			// the readback finds nothing and the task is parked.
			b.clock.Advance(40 * time.Second)
			if expired, recErr = b.reconcileG(b.sim); recErr != nil {
				return nil
			}
			b.clock.Advance(callTimeout + time.Minute)
			parked, recErr = b.reconcileG(b.sim)
			return nil
		}}

		b.send(t, task.TaskID)
		handle(t, b.h, context.Background(), b.deliver(t, 1, 120))

		if recErr != nil || expired.ExpiredToUnknown != 1 || parked.Parked != 1 || parked.ReadbackNotFound != 1 {
			t.Fatalf("setup: the reconciler did not expire the lease and park the task on a not-found readback (err %v; first run %+v; second run %+v)", recErr, expired, parked)
		}
		r, err := b.l.GetReview(context.Background(), task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		text := r.Summary + "\n" + strings.Join(r.Known, "\n")
		if !strings.Contains(text, "nothing was generated") {
			t.Fatalf("setup: the park's review does not say nothing was generated:\n%s", text)
		}
		if calls, effects := b.sim.Calls(task.TaskID), b.sim.SideEffects(task.TaskID); calls != 0 || effects != 0 {
			got := b.get(t, task.TaskID)
			t.Fatalf("the worker called the provider %d time(s) (%d side effect(s)) after its lease ended, the task read back not found and parked %s (%s) saying:\n%s",
				calls, effects, got.State, got.ReviewReason, text)
		}
	})
}
