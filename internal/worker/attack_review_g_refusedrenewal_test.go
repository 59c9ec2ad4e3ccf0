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

// TestAttackReviewGRefusedRenewalIsRecordedAsAStartedCall (adversarial
// review g, commit 6350c36): when leaseForCall's renewal is refused
// because the reconciler already expired the lease to unknown at this
// assignment, the worker makes no call — and knows it. record.go says "the
// uncertainty is void: the failure path retries it, from unknown too". It
// does not: the failure path's ScheduleRetry is fenced on state = running,
// its refusal (not_running) is not parked-at-mine, so the worker
// acknowledges "fenced" and drops what it knows. With a provider without
// readback (Bedrock-like: no idempotency, no Lookup) the reconciler then
// parks the task unknown_outcome, and the review tells the operator as a
// KNOWN fact that "its call ... was started (its worker recorded the
// start, then its lease expired)" and lists as uncertain whether the
// provider "performed (and billed) the generation" — while no call was
// ever made. DESIGN §1.4/§1.6: an attempt whose outcome is certain (not
// sent) is reported as uncertain, and the review states a falsehood as
// known; the operator's listed safe actions are "resolve as completed with
// evidence" (there is none), "retry accepting a possible duplicate" or
// "resolve failed". A task that needed nothing but a retry ends parked.
//
// Sequence (lease 30 s, Grace 5 s, C = the claim): the call-start mark's
// reply is lost and so is its first recognising read (17.5 s each, C+35);
// while the second read's reply is on its way the reconciler (C+36) finds
// the claim's lease 6 s past its end with the call marked: unknown. The
// worker sees its mark applied, under lease/3 left: leaseForCall renews,
// the renewal is refused (unknown at this version), no call.
//
// Fixed: the worker gives the assignment back from unknown
// (ledger.ReleaseUnknown: queued, its attempt given back, error
// call_not_started) — or, when the reconciler parked it first (parked),
// resolves the park and releases it (ledger.ReleaseLapsed) — and the next
// delivery makes the one call.
func TestAttackReviewGRefusedRenewalIsRecordedAsAStartedCall(t *testing.T) {
	for _, parked := range []bool{false, true} {
		name := "unknown"
		if parked {
			name = "parked"
		}
		t.Run(name, func(t *testing.T) { refusedRenewal(t, parked) })
	}
}

func refusedRenewal(t *testing.T, parked bool) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		b.h.CallTimeout = b.sim.CallTimeout()
		c0 := b.clock.Now()
		task := b.create(t, "g-refused-renewal", prompt)

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
				b.clock.Advance(17500 * time.Millisecond) // a request that hung until its timeout
			}
		}
		inj.OnResult = func(c faultinject.Call, params, result any, err error) {
			if c.TaskID != task.TaskID || c.Key() != "DynamoDB.GetItem" || c.N != 2 || err != nil {
				return
			}
			// The mark's second read was served; while its reply is on the
			// way, the reconciler runs (the worker's goroutine waits here)
			// — and, parked, runs again once the unknown task is due.
			b.clock.Advance(time.Second)
			recSum, recErr = b.reconcileG(b.sim)
			recRan = true
			if parked {
				b.clock.Advance(2 * time.Minute)
				parkSum, parkErr = b.reconcileG(b.sim)
			}
		}

		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 120)
		first := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); first <- resp }()
		await(t, first)
		inj.SetEnabled(false)

		if !recRan || recErr != nil || recSum.ExpiredToUnknown != 1 {
			t.Fatalf("setup: the reconciler did not expire the lease while the mark's read was answered (ran %v, err %v, %+v)", recRan, recErr, recSum)
		}
		if parked && (parkErr != nil || parkSum.Parked != 1) {
			t.Fatalf("setup: the second reconciler run did not park the unknown task (err %v, %+v)", parkErr, parkSum)
		}
		select {
		case <-g.started:
			t.Fatalf("setup: the provider was called at C+%s after the lease was expired to unknown", b.clock.Now().Sub(c0))
		default:
		}
		if n := b.sim.SideEffects(task.TaskID); n != 0 {
			t.Fatalf("setup: %d side effects, want none (no call was made)", n)
		}
		got := b.get(t, task.TaskID)
		if got.State == ledger.StateNeedsReview || got.State == ledger.StateUnknown {
			r, _ := b.l.GetReview(ctx, task.TaskID)
			var known string
			if r != nil {
				known = strings.Join(r.Known, " | ")
			}
			t.Fatalf("no provider call was ever made (0 side effects), yet the worker left the task %s (%s); review known: %s",
				got.State, got.ReviewReason, known)
		}
		// Released from unknown, or from the park: the attempt given back.
		if got.State != ledger.StateQueued || got.Attempts != 0 || got.ErrorClass != ledger.ErrorCallNotStarted {
			t.Fatalf("after the worker: %s, %d attempts, error %q; want queued, 0, %q", got.State, got.Attempts, got.ErrorClass, ledger.ErrorCallNotStarted)
		}
		if parked {
			r, err := b.l.GetReview(ctx, task.TaskID)
			if err != nil || r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionRetry || !strings.Contains(r.ResolutionNote, "made no provider call") {
				t.Fatalf("the park's review: %+v, %v; want resolved as retry, saying no call was made", r, err)
			}
		}
		// The next delivery makes the one call.
		if nb := time.UnixMilli(got.NotBefore); nb.After(b.clock.Now()) {
			b.clock.Set(nb)
		}
		h2 := b.handler(b.l, b.sim)
		h2.CallTimeout = b.sim.CallTimeout()
		b.send(t, task.TaskID)
		handle(t, h2, ctx, b.deliver(t, 1, 60))
		if got := b.get(t, task.TaskID); got.State != ledger.StateCompleted || b.sim.SideEffects(task.TaskID) != 1 {
			t.Fatalf("the task ended %s with %d side effects; want completed with 1", got.State, b.sim.SideEffects(task.TaskID))
		}
	})
}
