package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// lapsedRun runs one slow attempt (a Bedrock-like provider held by a gate)
// whose task the reconciler parks unknown_outcome before the call returns,
// with the worker's ledger faulted by decide; it returns the task and its
// review after the worker finished.
func lapsedRun(t *testing.T, e *testenv.Env, key string, decide func(c faultinject.Call) faultinject.Kind) (*bundle, *ledger.Task, *ledger.Review, *faultinject.Injector) {
	t.Helper()
	b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
	ctx := context.Background()
	g := newGate(b.sim)
	b.h.Provider = g
	task := b.create(t, key, prompt)
	inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
		if c.TaskID != task.TaskID {
			return ""
		}
		return decide(c)
	})
	b.send(t, task.TaskID)
	ev := b.deliver(t, 1, 60)
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
	g.waitStarted(t)
	if parked := b.settleByReconciler(t, task.TaskID); parked.State != ledger.StateNeedsReview || parked.ReviewReason != ledger.ReviewUnknownOutcome {
		t.Fatalf("setup: the reconciler left the task %s/%s", parked.State, parked.ReviewReason)
	}
	close(g.release)
	resp := await(t, done)
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("the record was not acknowledged: %+v", resp.BatchItemFailures)
	}
	return b, b.get(t, task.TaskID), mustReview(t, b, task.TaskID), inj
}

// TestLapsedResultSurvivesThrottleAndLostReply: saving a lapsed result is
// retried in-process after a throttle, and a try whose reply is lost is
// recognised as applied: the result is saved once and the review resolved
// by the worker.
func TestLapsedResultSurvivesThrottleAndLostReply(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b, got, r, inj := lapsedRun(t, e, "lapsed-faults", func(c faultinject.Call) faultinject.Kind {
			if c.Key() != "DynamoDB.TransactWriteItems" {
				return ""
			}
			switch c.N {
			case 1: // the first try is throttled (not applied)
				return faultinject.Throttle
			case 2: // the retry applies, but its reply is lost
				return faultinject.LostReply
			}
			return ""
		})
		if inj.Total(faultinject.Throttle) != 1 || inj.Total(faultinject.LostReply) != 1 {
			t.Fatalf("injected %+v, want one throttle and one lost reply on the lapsed save", inj.Injected())
		}
		rec, _ := b.sim.Record(got.TaskID)
		if got.State != ledger.StateCompleted || got.Result != string(rec.Result.Output) {
			t.Fatalf("task %s, result saved %v", got.State, got.Result == string(rec.Result.Output))
		}
		if r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionCompleted || !strings.HasPrefix(r.ResolvedBy, "worker ") {
			t.Fatalf("review %s/%s by %q", r.ReviewStatus, r.Resolution, r.ResolvedBy)
		}
		if n := b.sim.SideEffects(got.TaskID); n != 1 {
			t.Fatalf("provider side effects = %d, want 1", n)
		}
	})
}
