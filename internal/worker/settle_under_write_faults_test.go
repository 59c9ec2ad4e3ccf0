package worker_test

// Faults on the worker's own DynamoDB writes, driven through the real
// worker, ledger and reconciler on kumo and moto, with a Bedrock-like
// provider (no idempotency, no readback) unless stated. Each comment tells
// how the scenario would break the promise; each test asserts it holds.

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// faultLedger points the worker's ledger at a client whose calls are
// faulted by decide (the test's own ledger b.l stays clean).
func (b *bundle) faultLedger(t *testing.T, decide func(c faultinject.Call) faultinject.Kind) *faultinject.Injector {
	t.Helper()
	inj := faultinject.New(faultinject.ScheduleFunc(decide))
	cfg := b.e.AWS.Copy()
	cfg.APIOptions = append(cfg.APIOptions, inj.Register)
	l, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
	if err != nil {
		t.Fatal(err)
	}
	b.h.Ledger = l
	return inj
}

// reconcile runs the real reconciler once over the bundle's tables, at the
// bundle's clock, reading back through p.
func (b *bundle) reconcile(t *testing.T, p contract.Provider) reconciler.Summary {
	t.Helper()
	s, err := b.reconcileG(p)
	if err != nil {
		t.Fatalf("reconciler: %v (summary %+v)", err, s)
	}
	return s
}

// reconcileG is reconcile reporting its error instead of failing the test:
// for a fault hook, which runs on the worker's goroutine.
func (b *bundle) reconcileG(p contract.Provider) (reconciler.Summary, error) {
	h := &reconciler.Handler{
		Ledger:   b.l,
		Dispatch: &dispatch.Sender{SQS: b.e.SQS, QueueURL: b.e.Names.TaskQueueURL},
		Provider: p,
		Log:      logging.Discard(),
	}
	return h.Handle(context.Background(), json.RawMessage(`{}`))
}

// settleByReconciler lets the lease expire and runs the reconciler until
// the task leaves the live states (at most a few periods).
func (b *bundle) settleByReconciler(t *testing.T, id string) *ledger.Task {
	t.Helper()
	for range 5 {
		b.clock.Advance(time.Minute)
		b.reconcile(t, b.sim)
		if got := b.get(t, id); !got.State.Live() {
			return got
		}
	}
	return b.get(t, id)
}

// TestThrottledCompleteIsRepeatedNotDiscarded: the provider (not idempotent,
// no readback) succeeded; the Complete that would save its result is
// throttled (DynamoDB rejected it, nothing written). The worker defers the
// message, but the result only lived in its memory: the redelivered message
// finds the task running under the worker's own live lease and is
// acknowledged, and the reconciler later parks the task unknown_outcome,
// telling the operator it is uncertain whether the provider acted — when
// the provider did act and its result was in hand.
func TestThrottledCompleteIsRepeatedNotDiscarded(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "complete-throttled", prompt)
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == task.TaskID && c.N == 3 { // 1: the claim, 2: the call-start mark
				return faultinject.Throttle
			}
			return ""
		})
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if inj.Total(faultinject.Throttle) != 1 {
			t.Fatal("the completion was not throttled")
		}
		// The deferred record comes back (a redelivery of the same task).
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		got := b.settleByReconciler(t, task.TaskID)

		rec, ok := b.sim.Record(task.TaskID)
		if !ok || b.sim.SideEffects(task.TaskID) != 1 {
			t.Fatalf("provider record %v, side effects %d: want exactly one generation", ok, b.sim.SideEffects(task.TaskID))
		}
		if got.State != ledger.StateCompleted || got.Result != string(rec.Result.Output) {
			r, _ := b.l.GetReview(ctx, task.TaskID)
			t.Fatalf("a throttled (unapplied) Complete lost the provider's result: state %s, result saved %v, review %s: uncertain %q",
				got.State, got.Result == string(rec.Result.Output), r.Reason, r.Uncertain)
		}
	})
}

// TestUnconfirmedClaimIsNeverParkedAsUncertain: the claim is applied
// but its reply is lost, and the one consistent read that would recognise
// it (write_nonce) is throttled. The worker defers; the redelivery finds
// the task running under the lost claim's live lease and acknowledges; the
// provider is never called; the reconciler moves the task to unknown and
// parks it unknown_outcome, with a review saying the attempt "was sent"
// to the provider.
func TestUnconfirmedClaimIsNeverParkedAsUncertain(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "claim-lost-unverified", prompt)
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			switch {
			case c.Key() == "DynamoDB.UpdateItem" && c.TaskID == task.TaskID && c.N == 1:
				return faultinject.LostReply
			case c.Key() == "DynamoDB.GetItem" && c.TaskID == task.TaskID && c.N == 1:
				return faultinject.Throttle
			}
			return ""
		})
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if inj.Total(faultinject.LostReply) != 1 || inj.Total(faultinject.Throttle) != 1 {
			t.Fatalf("faults injected: %+v", inj.Injected())
		}
		b.send(t, task.TaskID) // the deferred record comes back
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		got := b.settleByReconciler(t, task.TaskID)

		if b.sim.Calls(task.TaskID) != 0 && got.State == ledger.StateCompleted {
			return // the attempt was recovered: the promise held
		}
		r, rerr := b.l.GetReview(ctx, task.TaskID)
		if b.sim.Calls(task.TaskID) == 0 && rerr == nil && r.Reason == ledger.ReviewUnknownOutcome {
			t.Fatalf("parked unknown_outcome for a task whose provider was never called (false uncertainty); state %s, known %q",
				got.State, r.Known)
		}
		t.Fatalf("state %s, provider calls %d, review %+v (err %v)", got.State, b.sim.Calls(task.TaskID), r, rerr)
	})
}

// TestOversizedResultFromUnknownIsParkedTooLarge: a slow but alive worker's
// lease was expired to unknown by the reconciler (same version: Complete
// from unknown is allowed). Its provider then returns a result too large
// for the item. The worker parks result_too_large conditioned on state
// running, which fails on unknown: the worker acknowledges, the knowledge
// "the call succeeded, the result is too large" is gone, and the reconciler
// (no readback) parks unknown_outcome instead.
func TestOversizedResultFromUnknownIsParkedTooLarge(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		g.late = &contract.Result{Output: []byte(`{"text":"` + strings.Repeat("w", itemsize.MaxItemBytes) + `"}`), Provider: "big", ProviderRef: "big-ref-1"}
		b.h.Provider = g
		task := b.create(t, "lapsed-oversized", prompt)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		done := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
		g.waitStarted(t)

		b.clock.Advance(time.Minute)
		claimed := b.get(t, task.TaskID)
		if _, err := b.l.ExpireToUnknown(ctx, task.TaskID, claimed.AssignmentVersion); err != nil {
			t.Fatalf("the reconciler's ExpireToUnknown: %v", err)
		}
		close(g.release)
		await(t, done)
		got := b.settleByReconciler(t, task.TaskID)
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatalf("no review item; state %s: %v", got.State, err)
		}
		if got.State != ledger.StateNeedsReview || r.Reason != ledger.ReviewResultTooLarge {
			t.Fatalf("the worker knew the call succeeded with a %d-byte result; the task is %s, review %s: %q / uncertain %q",
				len(g.late.Output), got.State, r.Reason, r.Summary, r.Uncertain)
		}
	})
}

// TestLapsedResultSavedAfterUnknownPark: a slow but alive worker's lease expired; the reconciler moved the task to
// unknown and, with no readback, parked it unknown_outcome ("whether the
// provider performed the generation" is uncertain; "retry" accepts a
// duplicate). Then the worker's call returns with the result. Its Complete
// (fenced on running or unknown at its version; the park kept the version)
// is refused; the worker must then save the result from the park
// (ledger.CompleteLapsed) and resolve the review, rather than discard it and
// leave a review whose suggested retry makes the non-idempotent provider
// act a second time.
func TestLapsedResultSavedAfterUnknownPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		task := b.create(t, "lapsed-after-park", prompt)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		done := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
		g.waitStarted(t)

		parked := b.settleByReconciler(t, task.TaskID)
		if parked.State != ledger.StateNeedsReview {
			t.Fatalf("setup: the reconciler left the task %s", parked.State)
		}
		close(g.release)
		await(t, done)

		got := b.get(t, task.TaskID)
		rec, ok := b.sim.Record(task.TaskID)
		if !ok {
			t.Fatal("the provider has no record")
		}
		r := mustReview(t, b, task.TaskID)
		if got.Result == string(rec.Result.Output) {
			// Saved: the promise held. The review says so, by the worker.
			if got.State != ledger.StateCompleted || r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionCompleted ||
				!strings.HasPrefix(r.ResolvedBy, "worker ") || !strings.Contains(r.ResolutionNote, "after the task was parked unknown_outcome") {
				t.Fatalf("result saved but task %s, review %s/%s by %q: %q", got.State, r.ReviewStatus, r.Resolution, r.ResolvedBy, r.ResolutionNote)
			}
			if n := b.sim.SideEffects(task.TaskID); n != 1 {
				t.Fatalf("provider side effects = %d, want 1", n)
			}
			return
		}
		if r.ReviewStatus == ledger.ReviewOpen && r.Reason == ledger.ReviewUnknownOutcome {
			t.Fatalf("the worker held the provider's result (side effects %d) and discarded it; the task stays %s with an open unknown_outcome review saying %q",
				b.sim.SideEffects(task.TaskID), got.State, r.Uncertain)
		}
	})
}

// TestThrottledRetryWriteNeverTurnsA429IntoUnknown: the provider answered
// 429 (it certainly did not act), and the worker's ScheduleRetry is
// throttled (nothing written). The worker defers; the redelivery meets its
// own live lease and is acknowledged; the reconciler expires the lease to
// unknown and parks unknown_outcome: "the provider may have acted". A
// definite, retryable failure became false uncertainty and a park.
func TestThrottledRetryWriteNeverTurnsA429IntoUnknown(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true, ThrottleRetryAfter: 2 * time.Second}))
		ctx := context.Background()
		task := b.create(t, "retry-throttled", prompt)
		b.sim.Script(task.TaskID, simulated.Throttle)
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == task.TaskID && c.N == 3 { // 1: the claim, 2: the call-start mark
				return faultinject.Throttle
			}
			return ""
		})
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if inj.Total(faultinject.Throttle) != 1 {
			t.Fatal("the schedule-retry write was not throttled")
		}
		b.send(t, task.TaskID) // the deferred record comes back
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		got := b.settleByReconciler(t, task.TaskID)
		if got.State != ledger.StateCompleted && got.State != ledger.StateNeedsReview {
			// a re-queued retry is also acceptable: run it to the end
			b.send(t, task.TaskID)
			handle(t, b.h, ctx, b.deliver(t, 1, 60))
			if got = b.get(t, task.TaskID); got.State != ledger.StateCompleted {
				t.Fatalf("task %s after the retry, want completed", got.State)
			}
		}
		if got.State == ledger.StateNeedsReview {
			r := mustReview(t, b, task.TaskID)
			if r.Reason == ledger.ReviewUnknownOutcome {
				t.Fatalf("a 429 (no side effect) ended parked unknown_outcome after one throttled ledger write; side effects %d, uncertain %q",
					b.sim.SideEffects(task.TaskID), r.Uncertain)
			}
		}
	})
}

// TestHeartbeatKeepsTheCallThatCanSettleUnknown: the change lets
// a slow but alive worker Complete from unknown at its own version (the
// assignment is still its own). But the heartbeat still treats the refused
// renewal of that same state as "fenced" and cancels the provider call, so
// the result that would settle the uncertainty is never produced: the
// feature only works if the call returns before the next heartbeat tick.
// Here the renewals are throttled until the reconciler expires the lease
// to unknown (a worker whose heartbeats did not get through); the next
// renewal is refused on state unknown at the worker's version.
func TestHeartbeatKeepsTheCallThatCanSettleUnknown(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		b.h.Lease = 60 * time.Millisecond // a heartbeat every 20 ms of real time
		task := b.create(t, "lapsed-heartbeat", prompt)
		// Only the heartbeat's renewals while the provider call runs are
		// throttled: the writes before the call (the claim, the renewal a
		// claim may make at once, the call-start mark) go through.
		var calling, renewals atomic.Bool
		renewed := make(chan struct{}, 64)
		throttled := make(chan struct{}, 64)
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == task.TaskID && calling.Load() {
				if !renewals.Load() {
					select {
					case throttled <- struct{}{}:
					default:
					}
					return faultinject.Throttle
				}
				renewed <- struct{}{}
			}
			return ""
		})
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		done := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
		g.waitStarted(t)
		calling.Store(true)
		select { // a renewal did not get through: the lease lapses
		case <-throttled:
		case <-time.After(hangBound):
			t.Fatal("no renewal was attempted while the provider call ran")
		}

		b.clock.Advance(time.Minute)
		claimed := b.get(t, task.TaskID)
		if _, err := b.l.ExpireToUnknown(ctx, task.TaskID, claimed.AssignmentVersion); err != nil {
			t.Fatalf("the reconciler's ExpireToUnknown: %v", err)
		}
		renewals.Store(true)
		<-renewed // the first renewal after the expiry has been sent
		select {
		case <-done:
			got := b.get(t, task.TaskID)
			t.Fatalf("the refused renewal (state unknown at the worker's own version %d) cancelled the provider call (cause %v); task %s, nothing saved",
				claimed.AssignmentVersion, g.Cause(), got.State)
		case <-time.After(5 * time.Second): // the call is still running: release it
		}
		close(g.release)
		await(t, done)
		if inj.Total(faultinject.Throttle) == 0 {
			t.Fatal("no renewal was throttled: the lease did not lapse as staged")
		}
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
	})
}
