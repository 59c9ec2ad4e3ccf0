package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A slow worker's call (no idempotency, no readback) is refused for its
// credentials after the reconciler expired its lease to unknown: the
// provider did not act. The worker's park from running is refused (unknown
// at its version) and settle sends the park from unknown. If the caller
// cancels in between (CancelRunning from unknown: unknown at the next
// version, cancel_version the worker's), the park from unknown is refused
// with the task at the cancel. The settle table has a cell for exactly
// this (a refusal at the cancel: CancelUnknown — the provider did not
// act), but the park from unknown drops the worker's knowledge for any
// refusal that is not "already parked", so nothing is sent. Without a
// readback the reconciler can only park the cancelled task unknown_outcome,
// saying the provider may have acted, where the worker knew it refused.
func TestRefusalEndsTheTaskCancelledWhenACancelLandsBetweenTheWorkersTwoParks(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		task := b.create(t, "refusal-cancel-race", prompt)
		b.sim.Script(task.TaskID, simulated.Credentials)
		var hookErr error
		cancelled := false
		b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			// The worker's second park (from unknown), before it is sent:
			// the caller's cancel lands first.
			if c.Operation == "TransactWriteItems" && c.TaskID == task.TaskID && c.N == 2 {
				cur, err := b.l.Get(ctx, task.TaskID)
				if err == nil {
					_, err = b.l.CancelRunning(ctx, cur)
				}
				cancelled, hookErr = err == nil, err
			}
			return ""
		})
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		done := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
		g.waitStarted(t)
		b.clock.Advance(time.Minute) // the lease and its grace are past
		if s := b.reconcile(t, b.sim); s.ExpiredToUnknown != 1 {
			t.Fatalf("setup: reconciler %+v; want the lease expired to unknown", s)
		}
		close(g.release) // the provider refuses the credentials: it did not act
		await(t, done)
		if hookErr != nil || !cancelled {
			t.Fatalf("setup: the cancel between the worker's two parks: cancelled=%v err=%v", cancelled, hookErr)
		}
		if logs := b.logs.String(); !strings.Contains(logs, "parking from unknown") {
			t.Fatalf("setup: the worker's park from unknown did not meet the cancel; logs:\n%s", logs)
		}
		if b.sim.SideEffects(task.TaskID) != 0 {
			t.Fatal("setup: the provider acted")
		}
		// The reconciler's next runs settle what the worker left.
		for range 3 {
			b.clock.Advance(time.Minute)
			b.reconcile(t, b.sim)
		}
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateCancelled {
			r, _ := b.l.GetReview(ctx, task.TaskID)
			t.Fatalf("the provider refused the credentials (it did not act) and the caller cancelled, yet the task is %s (%s: %q; review %q, uncertain: %s), want cancelled",
				got.State, got.ErrorClass, got.ErrorMessage, r.Reason, strings.Join(r.Uncertain, " | "))
		}
	})
}
