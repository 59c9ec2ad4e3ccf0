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

// TestAttackReviewHMarkFencedLeavesTheNoCallUnknown (adversarial review h,
// commit bed7a43): the commit promises "a worker that makes no call gives
// the task back from unknown too (ledger.ReleaseUnknown) or resolves its
// unknown_outcome park as a retry — it was parked saying its call was
// started". That fallback lives in Handler.release, but one no-call path
// never reaches release: markCallStarted acknowledges a *FencedError from
// the mark as "fenced" and returns, and a mark that is fenced because the
// reconciler expired this very assignment to unknown is exactly that.
//
// Sequence (lease 30 s, Grace 5 s, C = the claim; provider without
// idempotency or readback, Bedrock-like):
//
//	C+0   claim (lease to C+30); the call-start mark is applied (its lease
//	      is fresh enough, nothing renewed) but its reply is lost — a
//	      request that hung until its timeout;
//	C+40  meanwhile the reconciler finds the lease 10 s past its end with
//	      the call marked at this version: ExpireToUnknown (a new
//	      write_nonce);
//	      the worker's read that would recognise the mark sees another
//	      nonce: not recognised; save repeats the mark, which is refused
//	      (unknown at this version: not_running) → markCallStarted returns
//	      ack(fenced). No provider call, no release, no ReleaseUnknown.
//	later the reconciler (no readback) parks it unknown_outcome, telling
//	      the operator as a known fact that its call was started.
//
// The "parked" variant lets the reconciler park before the worker's read,
// and the worker leaves the park as it is too (no RetryLapsed).
//
// DESIGN §1.4/§1.6: an attempt the worker knows made no call is left
// uncertain, and the review states a falsehood as known, with "retry
// accepting a possible duplicate" among the operator's actions — the very
// defect review G reported and bed7a43 claims to fix, through a sibling
// path it did not cover.
func TestAttackReviewHMarkFencedLeavesTheNoCallUnknown(t *testing.T) {
	for _, parked := range []bool{false, true} {
		name := "unknown"
		if parked {
			name = "parked"
		}
		t.Run(name, func(t *testing.T) { markFenced(t, parked) })
	}
}

func markFenced(t *testing.T, parked bool) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		b.h.CallTimeout = b.sim.CallTimeout()
		task := b.create(t, "h-mark-fenced", prompt)

		var (
			recSum, parkSum reconciler.Summary
			recErr, parkErr error
			recRan          bool
		)
		// The mark's reply is lost and the SDK sends it again (Replayer):
		// the first send is applied, the second meets what happened in
		// between. Nothing else is faulted.
		var updates int
		rep := &faultinject.Replayer{Decide: func(c faultinject.Call, _ any) bool {
			if c.TaskID != task.TaskID || c.Key() != "DynamoDB.UpdateItem" {
				return false
			}
			updates++
			return updates == 2 // 1: claim, 2: the mark
		}}
		inj := faultinject.New(nil)
		inj.OnResult = func(c faultinject.Call, params, result any, err error) {
			if c.TaskID != task.TaskID || c.Key() != "DynamoDB.UpdateItem" || c.N != 2 || err != nil {
				return
			}
			// The mark's first send was applied; its reply is lost and
			// the request hangs until the SDK's timeout. Meanwhile the
			// reconciler runs (the worker's goroutine waits here).
			b.clock.Advance(40 * time.Second)
			recSum, recErr = b.reconcileG(b.sim)
			recRan = true
			if parked {
				b.clock.Advance(2 * time.Minute)
				parkSum, parkErr = b.reconcileG(b.sim)
			}
		}
		cfg := b.e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, rep.Register, inj.Register)
		fl, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		b.h.Ledger = fl

		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 120)
		first := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); first <- resp }()
		await(t, first)
		inj.SetEnabled(false)

		if !recRan || recErr != nil || recSum.ExpiredToUnknown != 1 {
			t.Fatalf("setup: the reconciler did not expire the marked lease while the mark's reply was lost (ran %v, err %v, %+v)", recRan, recErr, recSum)
		}
		if parked && (parkErr != nil || parkSum.Parked != 1) {
			t.Fatalf("setup: the second reconciler run did not park the unknown task (err %v, %+v)", parkErr, parkSum)
		}
		select {
		case <-g.started:
			t.Fatal("setup: the provider was called")
		default:
		}
		if n := b.sim.SideEffects(task.TaskID); n != 0 {
			t.Fatalf("setup: %d side effects, want none (no call was made)", n)
		}

		got := b.get(t, task.TaskID)
		// Fixed: released from unknown, or from the park (uncalled).
		if got.State != ledger.StateQueued || got.ErrorClass != ledger.ErrorCallNotStarted || got.Attempts != 0 {
			t.Errorf("after the worker: %s, error %q, %d attempts; want queued, %s, the attempt given back", got.State, got.ErrorClass, got.Attempts, ledger.ErrorCallNotStarted)
		}
		if got.State == ledger.StateUnknown && !parked {
			// What the reconciler does with it next: park it, saying the
			// call was started.
			b.clock.Advance(2 * time.Minute)
			b.reconcile(t, b.sim)
			got = b.get(t, task.TaskID)
		}
		if got.State == ledger.StateNeedsReview || got.State == ledger.StateUnknown {
			r, _ := b.l.GetReview(ctx, task.TaskID)
			var known string
			if r != nil {
				known = strings.Join(r.Known, " | ")
			}
			t.Fatalf("no provider call was ever made (0 side effects, the worker knew it: its call-start mark was refused "+
				"because the reconciler had expired its own assignment to unknown), yet the task ended %s (%s, error %q, attempt %d kept); "+
				"review known: %s", got.State, got.ReviewReason, got.ErrorClass, got.Attempts, known)
		}
	})
}
