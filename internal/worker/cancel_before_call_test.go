package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCancelBeforeTheCallEndsCancelled: every no-call path after the
// call-start mark gives the task back from where the reconciler put it
// (uncalled) — from unknown or from the unknown_outcome park at the
// worker's own version. A cancel while running puts it somewhere else:
// CancelRunning fences the assignment (unknown at v+1, cancel_version v),
// and the reconciler's rule for it trusts the call-start mark: marked at
// v, the call "may have started", so with no readback it would park the
// task unknown_outcome. The worker that made no call knows better (as it
// does for a definite refusal: cancelledRefusal ends the task cancelled),
// so its no-call path ends a cancel of its own version cancelled too.
//
// Sequence (lease 30 s; provider without idempotency keys or readback):
//
//	C+0   claim (v), call-start mark applied (lease to C+30); its reply is
//	      slow: C+25 when it arrives;
//	C+20  the caller cancels: CancelRunning → unknown at v+1,
//	      cancel_version v;
//	C+25  leaseForCall: under lease/3 left → renew → refused (v+1) → no
//	      call; the worker ends the task cancelled.
//
// DESIGN §1.6 and the cancel contract (ledger.CancelRunning: "ends it
// cancelled ... once it is known that the provider did not act (no call
// started ...)"): the caller asked to stop, nothing was called, the worker
// knew it — the task must not end parked for a person with a review that
// states a started call as known and a possible charge as uncertain.
//
// The "parked" variant: the worker's write hangs long enough for the
// reconciler to run that rule first, parking the cancel unknown_outcome at
// v+1 (C+140); the refused renewal finds needs_review at v+1 and resolves
// the review cancelled (cancelledKnown → ledger.CancelLapsed), as uncalled
// handles the park at v for an expired lease and cancelledInHand this very
// park for a reply in hand (cancelParkedAt).
func TestCancelBeforeTheCallEndsCancelled(t *testing.T) {
	t.Parallel()
	eachParked(t, func(t *testing.T, parked bool) {
		testenv.Each(t, func(t *testing.T, e *testenv.Env) { cancelBeforeTheCall(t, e, parked) })
	})
}

func cancelBeforeTheCall(t *testing.T, e *testenv.Env, parked bool) {
	b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
	ctx := context.Background()
	g := newGate(b.sim)
	b.h.Provider = g
	b.h.CallTimeout = b.sim.CallTimeout()
	task := b.create(t, "cancel-nocall", prompt)

	var setupErr error
	cancelled := false
	var sum reconciler.Summary
	inj := faultinject.New(nil)
	inj.OnResult = func(c faultinject.Call, params, result any, err error) {
		if c.TaskID != task.TaskID || c.Key() != "DynamoDB.UpdateItem" || c.N != 2 || err != nil {
			return
		}
		// The mark (the second UpdateItem after the claim) was applied;
		// its reply is slow. Meanwhile the caller cancels — and, parked,
		// the reconciler's cancel rule runs.
		b.clock.Advance(20 * time.Second)
		read, gerr := b.l.Get(context.Background(), task.TaskID)
		if gerr != nil {
			setupErr = gerr
			return
		}
		if read.State != ledger.StateRunning || read.CallStartedVersion != read.AssignmentVersion {
			setupErr = errSetup("the mark was not applied: " + string(read.State))
			return
		}
		if _, setupErr = b.l.CancelRunning(context.Background(), read); setupErr != nil {
			return
		}
		cancelled = true
		if !parked {
			b.clock.Advance(5 * time.Second)
			return
		}
		b.clock.Advance(2 * time.Minute)
		sum, setupErr = b.reconcileG(b.sim)
	}
	cfg := b.e.AWS.Copy()
	cfg.APIOptions = append(cfg.APIOptions, inj.Register)
	fl, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
	if err != nil {
		t.Fatal(err)
	}
	b.h.Ledger = fl

	b.send(t, task.TaskID)
	ev := b.deliver(t, 1, 120)
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
	await(t, done)
	if !cancelled || setupErr != nil {
		t.Fatalf("setup: the cancel while running did not land (%v, %v)", cancelled, setupErr)
	}
	if parked && sum.Parked != 1 {
		t.Fatalf("setup: reconciler %+v; want the cancelled marked attempt parked", sum)
	}
	select {
	case <-g.started:
		t.Fatal("setup: the provider was called; this test wants the no-call path")
	default:
	}
	if n := b.sim.SideEffects(task.TaskID); n != 0 {
		t.Fatalf("setup: %d side effects, want none", n)
	}
	wantEndedCancelled(t, b, task.TaskID, "cancelled while running before any provider call")
	if !parked {
		return
	}
	r, err := b.l.GetReview(ctx, task.TaskID)
	if err != nil || r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionCancelled ||
		!strings.HasPrefix(r.ResolvedBy, "worker ") || !strings.Contains(r.ResolutionNote, "no call was made") {
		t.Fatalf("the cancelled park's review: %+v, %v; want resolved cancelled by the worker, saying no call was made", r, err)
	}
}

type errSetup string

func (e errSetup) Error() string { return string(e) }
