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

// TestAttackReviewJCancelParkedBeforeTheUncalledWorkerKnows (adversarial
// review j, commit 9aad545): cancelledUncalled promises "a cancel between
// the call-start mark and the call ends cancelled" — the worker that made
// no call knows better than the reconciler's cancel rule, which parks a
// marked attempt unknown_outcome saying its call "had been started". It
// acts only while the cancel is still unknown at v+1 (ledger.CancelledAt).
// When the worker's write hangs long enough for the reconciler to run
// that rule first (the park at v+1, as uncalled handles the park at v for
// an expired lease, and cancelledInHand handles exactly this park for a
// reply in hand, cancelParkedAt), the worker's refused renewal finds
// needs_review at v+1 and acknowledges "fenced": the task stays parked
// for a person, its review stating a started call as known and a
// possible charge as uncertain, for a call never made.
//
// Sequence (lease 30 s; provider without idempotency keys or readback):
//
//	C+0   claim (v), call-start mark applied; its reply is slow;
//	C+20  the caller cancels: unknown at v+1, cancel_version v, due C+30;
//	C+140 the reconciler: marked at v = the cancelled version, no readback
//	      → parked unknown_outcome at v+1 ("had been started");
//	      the mark's reply arrives; leaseForCall: the lease is short →
//	      renew → refused (needs_review at v+1) → no call, ack "fenced".
func TestAttackReviewJCancelParkedBeforeTheUncalledWorkerKnows(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		b.h.CallTimeout = b.sim.CallTimeout()
		task := b.create(t, "j-cancel-parked-nocall", prompt)

		var setupErr error
		cancelled := false
		var sum reconciler.Summary
		inj := faultinject.New(nil)
		inj.OnResult = func(c faultinject.Call, params, result any, err error) {
			if c.TaskID != task.TaskID || c.Key() != "DynamoDB.UpdateItem" || c.N != 2 || err != nil {
				return
			}
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
			t.Fatalf("setup: cancel %v, %v", cancelled, setupErr)
		}
		if sum.Parked != 1 {
			t.Fatalf("setup: reconciler %+v; want the cancelled marked attempt parked", sum)
		}
		select {
		case <-g.started:
			t.Fatal("setup: the provider was called; this attack wants the no-call path")
		default:
		}
		if n := b.sim.SideEffects(task.TaskID); n != 0 {
			t.Fatalf("setup: %d side effects, want none", n)
		}
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateCancelled {
			var known, uncertain string
			if r, _ := b.l.GetReview(ctx, task.TaskID); r != nil && r.ReviewStatus == ledger.ReviewOpen {
				known, uncertain = strings.Join(r.Known, " | "), strings.Join(r.Uncertain, " | ")
			}
			t.Fatalf("cancelled while running between the call-start mark and the call; no call was made and the worker knew it, yet the task is %s (%s) and its open review says\nknown: %s\nuncertain: %s\nwant cancelled (cancelledUncalled) — the park at v+1 was not revised",
				got.State, got.ReviewReason, known, uncertain)
		}
		// Fixed (cancelledKnown → ledger.CancelLapsed): the park's review
		// is resolved by the worker, saying no call was made.
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil || r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionCancelled ||
			!strings.HasPrefix(r.ResolvedBy, "worker ") || !strings.Contains(r.ResolutionNote, "no call was made") {
			t.Fatalf("the cancelled park's review: %+v, %v; want resolved cancelled by the worker, saying no call was made", r, err)
		}
	})
}
