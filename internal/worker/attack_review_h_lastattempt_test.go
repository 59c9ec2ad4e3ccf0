package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestAttackReviewHRetryLapsedKeepsTheAttemptOfNoCall (adversarial review
// h, commit bed7a43): Handler.release's two fallbacks treat the same fact
// — "this assignment made no provider call" — differently. From unknown
// (ReleaseUnknown) the attempt is given back (attempts - 1, like Release);
// from the unknown_outcome park (RetryLapsed) it is kept, and the review is
// resolved "retried". On a task's last attempt that retry can never
// happen: the next claim is refused (attempts = max_attempts) and the task
// is parked budget_exhausted — "used 1 of 1 attempts without a result" —
// although the provider was never called, and the resolved review says
// "retried". Which of the two the task gets depends only on whether the
// reconciler's park ran before the worker's write.
//
// Same sequence as review G's refused renewal (the mark's reply and its
// first read lost, the reconciler expires the lease and then parks it
// while the second read is answered; leaseForCall's renewal is refused),
// with max_attempts = 1. Fixed: ledger.ReleaseLapsed gives the attempt
// back, as ReleaseUnknown does.
func TestAttackReviewHRetryLapsedKeepsTheAttemptOfNoCall(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		b.h.CallTimeout = b.sim.CallTimeout()
		task := b.create(t, "h-last-attempt", prompt, func(n *ledger.NewTask) { n.MaxAttempts = 1 })

		var (
			recSum, parkSum reconciler.Summary
			recErr, parkErr error
			recRan          bool
		)
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.TaskID != task.TaskID {
				return ""
			}
			switch {
			case c.Key() == "DynamoDB.UpdateItem" && c.N == 2: // 1: claim, 2: the mark
				return faultinject.LostReply
			case c.Key() == "DynamoDB.GetItem" && c.N == 1: // the mark's first recognising read
				return faultinject.LostReply
			}
			return ""
		})
		inj.OnInject = func(c faultinject.Call, k faultinject.Kind) {
			if c.TaskID == task.TaskID && k == faultinject.LostReply {
				b.clock.Advance(17500 * time.Millisecond)
			}
		}
		inj.OnResult = func(c faultinject.Call, params, result any, err error) {
			if c.TaskID != task.TaskID || c.Key() != "DynamoDB.GetItem" || c.N != 2 || err != nil {
				return
			}
			b.clock.Advance(time.Second)
			recSum, recErr = b.reconcileG(b.sim)
			recRan = true
			b.clock.Advance(2 * time.Minute)
			parkSum, parkErr = b.reconcileG(b.sim)
		}

		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 120)
		first := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); first <- resp }()
		await(t, first)
		inj.SetEnabled(false)

		if !recRan || recErr != nil || recSum.ExpiredToUnknown != 1 || parkErr != nil || parkSum.Parked != 1 {
			t.Fatalf("setup: expire %v %+v, park %v %+v", recErr, recSum, parkErr, parkSum)
		}
		got := b.get(t, task.TaskID)
		r, _ := b.l.GetReview(ctx, task.TaskID)
		// Fixed: the park is resolved and the task released with its
		// attempt given back (ledger.ReleaseLapsed).
		if got.State != ledger.StateQueued || got.Attempts != 0 || r == nil || r.Resolution != ledger.ResolutionRetry {
			t.Fatalf("after the worker %s with %d attempts, review %+v; want queued, the attempt given back, the park resolved as retry", got.State, got.Attempts, r)
		}
		if n := b.sim.SideEffects(task.TaskID); n != 0 {
			t.Fatalf("setup: %d side effects", n)
		}
		note := r.ResolutionNote

		// The next delivery: the "retry" the review promised.
		if nb := time.UnixMilli(got.NotBefore); nb.After(b.clock.Now()) {
			b.clock.Set(nb)
		}
		h2 := b.handler(b.l, b.sim)
		h2.CallTimeout = b.sim.CallTimeout()
		b.send(t, task.TaskID)
		handle(t, h2, ctx, b.deliver(t, 1, 60))

		got = b.get(t, task.TaskID)
		if got.State != ledger.StateCompleted || b.sim.SideEffects(task.TaskID) != 1 {
			r2, _ := b.l.GetReview(ctx, task.TaskID)
			var summary string
			if r2 != nil {
				summary = r2.Summary
			}
			t.Fatalf("the task's only attempt never called the provider (%d calls); the worker resolved its park as %q — "+
				"yet the attempt was kept (attempts %d of %d), the retry could not be claimed, and the task ended %s (%s): %s",
				b.sim.Calls(task.TaskID), strings.TrimSpace(note), got.Attempts, got.MaxAttempts, got.State, got.ReviewReason, summary)
		}
	})
}
