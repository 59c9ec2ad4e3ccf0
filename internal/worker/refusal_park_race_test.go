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

// refusalBetweenParks runs one attempt whose provider (no idempotency, no
// readback) refuses the credentials — it did not act — after the
// reconciler expired the worker's lease to unknown: the worker's park from
// running is refused, and settle sends the park from unknown. between runs
// just before that second park is sent (the worker's second
// TransactWriteItems). It returns the task, the attempt over.
func refusalBetweenParks(t *testing.T, b *bundle, key string, between func(ctx context.Context, id string) error) *ledger.Task {
	t.Helper()
	ctx := context.Background()
	g := newGate(b.sim)
	b.h.Provider = g
	task := b.create(t, key, prompt)
	b.sim.Script(task.TaskID, simulated.Credentials)
	var hookErr error
	ran := false
	b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
		if c.Operation == "TransactWriteItems" && c.TaskID == task.TaskID && c.N == 2 {
			ran, hookErr = true, between(ctx, task.TaskID)
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
	if !ran || hookErr != nil {
		t.Fatalf("setup: the write between the worker's two parks: ran=%v err=%v", ran, hookErr)
	}
	if logs := b.logs.String(); !strings.Contains(logs, "parking from unknown") {
		t.Fatalf("setup: the worker sent no park from unknown; logs:\n%s", logs)
	}
	if b.sim.SideEffects(task.TaskID) != 0 {
		t.Fatal("setup: the provider acted")
	}
	return task
}

// If the reconciler parks the task unknown_outcome between the worker's two
// parks (Settle has passed since the expiry), the park from unknown is
// refused too, and the settle table records the refusal from that park
// (ReviseLapsed): docs/timing.md promises that a refusal in so many words
// after the lease lapsed, "or after it was parked unknown_outcome", is
// recorded as what it was (parked provider_config). Otherwise the review
// would say the provider may have acted, list a duplicate call among the
// operator's actions, and say nothing of the credentials to fix.
func TestRefusalRecordedWhenTheReconcilerParksBetweenTheWorkersTwoParks(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		task := refusalBetweenParks(t, b, "refusal-park-race", func(ctx context.Context, id string) error {
			b.clock.Advance(2 * time.Minute)
			s, err := b.reconcileG(b.sim)
			if err == nil && s.Parked != 1 {
				t.Errorf("setup: the reconciler's run between the parks: %+v; want it parked", s)
			}
			return err
		})
		got := b.get(t, task.TaskID)
		r, err := b.l.GetReview(context.Background(), task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ReviewReason != ledger.ReviewProviderConfig || r.Reason != ledger.ReviewProviderConfig {
			t.Fatalf("the provider refused the credentials (it did not act), yet the task is parked %q (review %q: %s; known: %s), want %s",
				got.ReviewReason, r.Reason, r.Summary, strings.Join(r.Known, " | "), ledger.ReviewProviderConfig)
		}
	})
}

// If the caller cancels between the worker's two parks (the task unknown
// at the next version, cancel_version the worker's), the park from unknown
// is refused, and the settle table ends the task cancelled from the cancel
// (CancelUnknown): the provider refused the call. Without a readback the
// reconciler could only park it unknown_outcome, saying the provider may
// have acted.
func TestRefusalEndsTheTaskCancelledWhenACancelLandsBetweenTheWorkersTwoParks(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		task := refusalBetweenParks(t, b, "refusal-cancel-race", func(ctx context.Context, id string) error {
			cur, err := b.l.Get(ctx, id)
			if err == nil {
				_, err = b.l.CancelRunning(ctx, cur)
			}
			return err
		})
		for range 3 { // the reconciler's next runs settle anything the worker left
			b.clock.Advance(time.Minute)
			b.reconcile(t, b.sim)
		}
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateCancelled {
			r, err := b.l.GetReview(context.Background(), task.TaskID)
			if err != nil {
				r = &ledger.Review{}
			}
			t.Fatalf("the provider refused the credentials (it did not act) and the caller cancelled, yet the task is %s (%s: %q; review %q, uncertain: %s), want cancelled",
				got.State, got.ErrorClass, got.ErrorMessage, r.Reason, strings.Join(r.Uncertain, " | "))
		}
	})
}
