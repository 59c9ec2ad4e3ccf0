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
// provider did not act. The worker's park from running is refused (the task
// is unknown at its version) and settle sends the park from unknown. If the
// reconciler parks the task unknown_outcome in between (Settle has passed
// since the expiry), the worker's park from unknown is refused too, and
// the settle table records the refusal from that park (ReviseLapsed):
// docs/timing.md promises that a refusal in so many words after the lease
// lapsed, "or after it was parked unknown_outcome", is recorded as what it
// was (parked provider_config). Otherwise the review would say the
// provider may have acted, list a duplicate call among the operator's
// actions, and say nothing of the credentials that need fixing.
func TestRefusalRecordedWhenTheReconcilerParksBetweenTheWorkersTwoParks(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		task := b.create(t, "refusal-park-race", prompt)
		b.sim.Script(task.TaskID, simulated.Credentials)
		var hookErr error
		parked := false
		b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			// The worker's second park (from unknown), before it is sent:
			// the reconciler's run, Settle after the expiry, parks first.
			if c.Operation == "TransactWriteItems" && c.TaskID == task.TaskID && c.N == 2 {
				b.clock.Advance(2 * time.Minute)
				s, err := b.reconcileG(b.sim)
				parked, hookErr = s.Parked == 1, err
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
		if hookErr != nil || !parked {
			t.Fatalf("setup: the reconciler's park between the worker's two parks: parked=%v err=%v", parked, hookErr)
		}
		if b.sim.SideEffects(task.TaskID) != 0 {
			t.Fatal("setup: the provider acted")
		}
		got := b.get(t, task.TaskID)
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if logs := b.logs.String(); !strings.Contains(logs, "parking from unknown") {
			t.Fatalf("setup: the worker's park from unknown did not meet the reconciler's park; logs:\n%s", logs)
		}
		if got.ReviewReason != ledger.ReviewProviderConfig || r.Reason != ledger.ReviewProviderConfig {
			t.Fatalf("the provider refused the credentials (it did not act), yet the task is parked %q (review %q: %s; known: %s), want %s",
				got.ReviewReason, r.Reason, r.Summary, strings.Join(r.Known, " | "), ledger.ReviewProviderConfig)
		}
	})
}
