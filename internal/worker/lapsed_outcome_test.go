package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestLapsedRejectionFailsTheTaskAndResolvesItsReview: a slow but alive
// worker (Bedrock-like provider) whose lease lapsed; the reconciler parks
// the task unknown_outcome at the worker's own version ("whether the
// provider performed (and billed) the generation"). The provider then
// answers 400: it certainly did not act. Fail is fenced on running, so the
// worker settles the park with ledger.FailLapsed: the task is failed and
// the review resolved as failed by the worker, with a note saying what the
// provider answered — never left saying the provider may have billed —
// and the requester told of the failure in the same transaction, as a
// failure before the park would have told them.
func TestLapsedRejectionFailsTheTaskResolvesItsReviewAndNotifiesTheRequester(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}),
			withHandler(func(h *worker.Handler) { h.Notify = notifyConfig(t) }))
		g := newGate(b.sim)
		b.h.Provider = g
		task := b.create(t, "lapsed-400", prompt, requester)
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
		if got.State != ledger.StateFailed || r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionFailed ||
			!strings.HasPrefix(r.ResolvedBy, "worker ") || !strings.Contains(r.ResolutionNote, "did not act") {
			t.Fatalf("task %s, review %s/%s by %q note %q; want failed, resolved failed by the worker", got.State, r.ReviewStatus, r.Resolution, r.ResolvedBy, r.ResolutionNote)
		}
		var failed []ledger.Task
		for _, n := range b.children(t, task.TaskID) {
			if n.Provenance != nil && n.Provenance.Event == followup.EventFailed {
				failed = append(failed, n)
			}
		}
		if len(failed) != 1 || failed[0].IdempotencyKey != followup.Key(task.TaskID, followup.EventFailed, got.AssignmentVersion, followup.EmailDestination) {
			t.Fatalf("failure notifications %+v; want one, keyed for version %d", failed, got.AssignmentVersion)
		}
	})
}

// TestLapsedTransientRefusalSchedulesTheRetry: the provider answers 429
// to the lapsed call (it did not act). ScheduleRetry is fenced on running,
// so the worker settles the park with ledger.RetryLapsed: the task waits
// for its retry and the review is resolved as retry by the worker.
func TestLapsedTransientRefusalSchedulesTheRetry(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		g := newGate(b.sim)
		b.h.Provider = g
		task := b.create(t, "lapsed-429", prompt)
		b.sim.Script(task.TaskID, simulated.Throttle)
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
		if got.State != ledger.StateRetryWait || got.NotBefore == 0 || got.ErrorClass != "transient" {
			t.Fatalf("task %s not_before %d class %q; want retry_wait with not_before, class transient", got.State, got.NotBefore, got.ErrorClass)
		}
		if r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionRetry || !strings.HasPrefix(r.ResolvedBy, "worker ") ||
			!strings.Contains(r.ResolutionNote, "did not act") {
			t.Fatalf("review %s/%s by %q note %q; want resolved retry by the worker", r.ReviewStatus, r.Resolution, r.ResolvedBy, r.ResolutionNote)
		}
	})
}

// lapsedOutcomeRun is lapsedRun (lapsed_test.go) with a hook to script the
// provider for the task before its one slow call.
func lapsedOutcomeRun(t *testing.T, e *testenv.Env, key string, prep func(b *bundle, id string), decide func(c faultinject.Call) faultinject.Kind) (*bundle, *ledger.Task, *ledger.Review) {
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

// TestLapsedResultWhoseSaveKeepsFailingRevisesTheReviewWithItsReference:
// the lapsed result is in hand, but every TransactWriteItems is throttled:
// CompleteLapsed is repeated with save's budget, then the review revision
// (ReviseLapsed) too. The worker falls back to revising the review item
// alone (ReviseLapsedReview): it is result_not_saved with the provider's
// reference, as the in-running path parks it — not an uncertainty whose
// "retry" makes the provider act twice.
func TestLapsedResultWhoseSaveKeepsFailingRevisesTheReviewWithItsReference(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b, got, r := lapsedOutcomeRun(t, e, "lapsed-throttled", func(*bundle, string) {},
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
		if r.ReviewStatus != ledger.ReviewOpen || r.Reason != ledger.ReviewResultNotSaved || r.ProviderRef != rec.Result.ProviderRef {
			t.Fatalf("review %s/%s ref %q; want open result_not_saved with ref %q", r.ReviewStatus, r.Reason, r.ProviderRef, rec.Result.ProviderRef)
		}
	})
}

// TestLapsedOversizedResultRevisesTheReviewToResultTooLarge: the lapsed
// result is larger than the item limit. The park from running is refused
// (the task is parked unknown_outcome at this version), so the worker
// revises the park (ReviseLapsed): task and review say result_too_large
// with the facts, as from running or unknown.
func TestLapsedOversizedResultRevisesTheReviewToResultTooLarge(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b, got, r := lapsedOutcomeRun(t, e, "lapsed-oversized",
			func(b *bundle, id string) { b.sim.Script(id, simulated.Oversized) },
			func(faultinject.Call) faultinject.Kind { return "" })
		if b.sim.SideEffects(got.TaskID) != 1 {
			t.Fatalf("setup: want exactly one generation")
		}
		if got.State == ledger.StateNeedsReview && r.ReviewStatus == ledger.ReviewOpen && r.Reason == ledger.ReviewUnknownOutcome {
			t.Fatalf("an oversized lapsed result (the provider acted) left the task parked unknown_outcome, uncertain %q; want result_too_large",
				r.Uncertain)
		}
		rec, _ := b.sim.Record(got.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewResultTooLarge || r.ReviewStatus != ledger.ReviewOpen ||
			r.Reason != ledger.ReviewResultTooLarge || r.ProviderRef != rec.Result.ProviderRef || got.Result != "" {
			t.Fatalf("task %s/%s, review %s/%s ref %q; want both result_too_large with ref %q and no result",
				got.State, got.ReviewReason, r.ReviewStatus, r.Reason, r.ProviderRef, rec.Result.ProviderRef)
		}
	})
}
