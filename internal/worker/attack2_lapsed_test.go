package worker_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestAttack2LapsedDefinitiveRejectionIsNotLeftUncertain: a slow but alive
// worker (Bedrock-like provider) whose lease lapsed; the reconciler parks
// the task unknown_outcome at the worker's own version ("whether the
// provider performed (and billed) the generation"). The heartbeat keeps
// the call going precisely so its answer can settle the task — but only a
// success is saved (CompleteLapsed). Here the provider answers 400: it
// certainly did not act. Fail is fenced on running, so the worker's
// knowledge is discarded and the task stays parked as uncertain, telling
// the operator the provider may have acted and billed.
func TestAttack2LapsedDefinitiveRejectionIsNotLeftUncertain(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		g := newGate(b.sim)
		b.h.Provider = g
		task := b.create(t, "attack2-lapsed-400", prompt)
		b.sim.Script(task.TaskID, simulated.BadRequest)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		done := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(context.Background(), ev); done <- resp }()
		g.waitStarted(t)
		if parked := b.settleByReconciler(t, task.TaskID); parked.State != ledger.StateNeedsReview || parked.ReviewReason != ledger.ReviewUnknownOutcome {
			t.Fatalf("setup: the reconciler left the task %s/%s", parked.State, parked.ReviewReason)
		}
		close(g.release)
		await(t, done)
		got := b.get(t, task.TaskID)
		r := mustReview(t, b, task.TaskID)
		if b.sim.SideEffects(task.TaskID) != 0 {
			t.Fatalf("setup: the provider acted")
		}
		if got.State == ledger.StateNeedsReview && r.ReviewStatus == ledger.ReviewOpen && r.Reason == ledger.ReviewUnknownOutcome {
			t.Fatalf("the worker learned the provider rejected the request (400, no side effect), yet the task stays parked "+
				"unknown_outcome with uncertain %q (error %s: %s)", r.Uncertain, got.ErrorClass, got.ErrorMessage)
		}
	})
}

// attack2LapsedRun is lapsedRun (lapsed_test.go) with a hook to script the
// provider for the task before its one slow call.
func attack2LapsedRun(t *testing.T, e *testenv.Env, key string, prep func(b *bundle, id string), decide func(c faultinject.Call) faultinject.Kind) (*bundle, *ledger.Task, *ledger.Review) {
	t.Helper()
	b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
	g := newGate(b.sim)
	b.h.Provider = g
	task := b.create(t, key, prompt)
	prep(b, task.TaskID)
	b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
		if c.TaskID != task.TaskID {
			return ""
		}
		return decide(c)
	})
	b.send(t, task.TaskID)
	ev := b.deliver(t, 1, 60)
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := b.h.Handle(context.Background(), ev); done <- resp }()
	g.waitStarted(t)
	if parked := b.settleByReconciler(t, task.TaskID); parked.State != ledger.StateNeedsReview || parked.ReviewReason != ledger.ReviewUnknownOutcome {
		t.Fatalf("setup: the reconciler left the task %s/%s", parked.State, parked.ReviewReason)
	}
	close(g.release)
	await(t, done)
	// The record the worker deferred (if any) comes back once, faults gone.
	b.h.Ledger = b.l
	b.h.Provider = b.sim
	b.send(t, task.TaskID)
	handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
	return b, b.get(t, task.TaskID), mustReview(t, b, task.TaskID)
}

// TestAttack2LapsedResultWhoseSaveKeepsFailingIsNotUncertain: the lapsed
// result is in hand, but every CompleteLapsed is throttled (3 tries, about
// a second). The worker defers and the result is gone; the redelivery
// meets the parked task and is acknowledged. The review still says it is
// uncertain whether the provider acted — the provider DID act (and billed),
// and an operator following the review's "retry" makes it act twice. The
// in-running path parks result_not_saved with the provider's reference in
// the same situation; the lapsed path records nothing.
func TestAttack2LapsedResultWhoseSaveKeepsFailingIsNotUncertain(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b, got, r := attack2LapsedRun(t, e, "attack2-lapsed-throttled", func(*bundle, string) {},
			func(c faultinject.Call) faultinject.Kind {
				if c.Key() == "DynamoDB.TransactWriteItems" {
					return faultinject.Throttle
				}
				return ""
			})
		rec, ok := b.sim.Record(got.TaskID)
		if !ok || b.sim.SideEffects(got.TaskID) != 1 {
			t.Fatalf("setup: want exactly one generation")
		}
		if got.State == ledger.StateNeedsReview && r.ReviewStatus == ledger.ReviewOpen && r.Reason == ledger.ReviewUnknownOutcome &&
			r.ProviderRef != rec.Result.ProviderRef {
			t.Fatalf("the provider acted (ref %q) and the worker held its result, yet the open review still says %q with no reference",
				rec.Result.ProviderRef, r.Uncertain)
		}
	})
}

// TestAttack2LapsedOversizedResultIsNotUncertain: the lapsed result is
// larger than the item limit. CompleteLapsed refuses it (ItemTooLarge),
// the worker breaks off and leaves the task parked unknown_outcome — while
// from running or unknown the same result is parked result_too_large with
// the facts.
func TestAttack2LapsedOversizedResultIsNotUncertain(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b, got, r := attack2LapsedRun(t, e, "attack2-lapsed-oversized",
			func(b *bundle, id string) { b.sim.Script(id, simulated.Oversized) },
			func(faultinject.Call) faultinject.Kind { return "" })
		if b.sim.SideEffects(got.TaskID) != 1 {
			t.Fatalf("setup: want exactly one generation")
		}
		if got.State == ledger.StateNeedsReview && r.ReviewStatus == ledger.ReviewOpen && r.Reason == ledger.ReviewUnknownOutcome {
			t.Fatalf("an oversized lapsed result (the provider acted) left the task parked unknown_outcome, uncertain %q; want result_too_large",
				r.Uncertain)
		}
	})
}
