package worker_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

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
