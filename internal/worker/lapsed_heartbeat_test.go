package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestHeartbeatKeepsTheCallAParkedUnknownOutcomeWaitsFor: the worker's
// renewals do not get through, the reconciler expires the lease to unknown
// and parks it unknown_outcome (no readback) — all at the worker's own
// assignment version. The next renewal is refused; it must not cancel the
// call, because its result is exactly what the open review is uncertain
// about: CompleteLapsed saves it and resolves the review.
func TestHeartbeatKeepsTheCallAParkedUnknownOutcomeWaitsFor(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		b.h.Lease = 60 * time.Millisecond // a heartbeat every 20 ms of real time
		task := b.create(t, "parked-heartbeat", prompt)
		// Only the heartbeat's renewals while the provider call runs are
		// throttled: the writes before the call (the claim, the renewal a
		// claim may make at once, the call-start mark) go through.
		var calling, renewals atomic.Bool
		renewed := make(chan struct{}, 64)
		throttled := make(chan struct{}, 64)
		b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == task.TaskID && calling.Load() {
				if !renewals.Load() {
					select {
					case throttled <- struct{}{}:
					default:
					}
					return faultinject.Throttle
				}
				select {
				case renewed <- struct{}{}:
				default:
				}
			}
			return ""
		})
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		done := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
		g.waitStarted(t)
		calling.Store(true)
		select {
		case <-throttled:
		case <-time.After(hangBound):
			t.Fatal("no renewal was attempted while the provider call ran")
		}

		b.clock.Advance(time.Minute)
		claimed := b.get(t, task.TaskID)
		unk, err := b.l.ExpireToUnknown(ctx, task.TaskID, claimed.AssignmentVersion)
		if err != nil {
			t.Fatalf("the reconciler's ExpireToUnknown: %v", err)
		}
		rv := review.UnknownOutcome(unk, "simulated", b.clock.Now(), "the provider offers no readback")
		if _, err := b.l.Park(ctx, unk, ledger.ParkOptions{State: ledger.StateUnknown, Version: unk.AssignmentVersion}, rv); err != nil {
			t.Fatalf("the reconciler's park: %v", err)
		}
		renewals.Store(true)
		<-renewed // a renewal after the park has been sent (and is refused)
		select {
		case <-done:
			t.Fatalf("the refused renewal (parked unknown_outcome at the worker's own version) cancelled the call (cause %v)", g.Cause())
		case <-time.After(3 * time.Second): // the call is still running: release it
		}
		close(g.release)
		await(t, done)
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		rev, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil || rev.ReviewStatus != ledger.ReviewResolved {
			t.Fatalf("review after the lapsed save: %+v (%v), want resolved", rev, err)
		}
		if n := b.sim.SideEffects(task.TaskID); n != 1 {
			t.Fatalf("provider side effects = %d, want 1", n)
		}
	})
}
