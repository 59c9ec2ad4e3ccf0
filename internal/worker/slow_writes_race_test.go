package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestTooLittleTimeBeforeTheCallGivesBackFromWhereTheRaceLeftIt: when the
// writes after the call-start mark ate the invocation's time, the worker
// makes no call and releases its marked assignment. That release can
// itself be slow, and meanwhile the reconciler may expire the lease to
// unknown (and park it unknown_outcome), or the caller may cancel
// (CancelRunning: unknown at v+1, cancel_version v; parked by the
// reconciler's cancel rule). Left there, a marked attempt is parked saying
// its call was started. The worker knows no call was made, so it must
// give the task back from unknown (or resolve the park as a retry), or
// end a cancel of its own assignment cancelled.
//
// DESIGN §1.4/§1.6: an attempt known to have made no call is never left
// uncertain, and no review states a started call as known.
func TestTooLittleTimeBeforeTheCallGivesBackFromWhereTheRaceLeftIt(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"unknown", "parked", "cancel", "cancel-parked"} {
		t.Run(mode, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) { tooLittleTimeRace(t, e, mode) })
		})
	}
}

func tooLittleTimeRace(t *testing.T, e *testenv.Env, mode string) {
	const (
		// The give-back's writes (refused, then from where the race left
		// the task) have the margin: seconds each on a loaded moto.
		margin      = 8 * time.Second
		callTimeout = 2 * time.Second
		// The claim has up to 2.5 s (a loaded moto) and still leaves a
		// call timeout; the mark then leaves at most 1.5 s.
		slack    = 2500 * time.Millisecond
		slowMark = 3 * time.Second
	)
	b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}),
		withHandler(func(h *worker.Handler) { h.DeadlineMargin = margin; h.CallTimeout = callTimeout }))
	task := b.create(t, "slow-mark-race-"+mode, prompt, func(n *ledger.NewTask) { n.MaxAttempts = 1 })
	cancel := strings.HasPrefix(mode, "cancel")
	parked := strings.HasSuffix(mode, "parked")

	var (
		raced    bool
		raceErr  error
		sum, psm reconciler.Summary
	)
	b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
		if c.TaskID != task.TaskID || c.Key() != "DynamoDB.UpdateItem" {
			return ""
		}
		switch c.N {
		case 2: // the call-start mark, answered slowly
			time.Sleep(slowMark)
		case 3: // the release: before it lands, the race
			raced = true
			cur, err := b.l.Get(context.Background(), task.TaskID)
			if err != nil {
				raceErr = err
				return ""
			}
			if cur.State != ledger.StateRunning || cur.CallStartedVersion != cur.AssignmentVersion {
				raceErr = errSetup("the mark was not applied before the release: " + string(cur.State))
				return ""
			}
			if cancel {
				if _, raceErr = b.l.CancelRunning(context.Background(), cur); raceErr != nil {
					return ""
				}
			} else {
				b.clock.Advance(40 * time.Second)
				if sum, raceErr = b.reconcileG(b.sim); raceErr != nil {
					return ""
				}
			}
			if parked {
				b.clock.Advance(2 * time.Minute)
				psm, raceErr = b.reconcileG(b.sim)
			}
		}
		return ""
	})

	b.send(t, task.TaskID)
	ev := b.deliver(t, 1, 60)
	// Work has a call timeout and the slack after the margin: enough for
	// the call at the claim, not after the mark.
	ctx, stop := context.WithTimeout(context.Background(), margin+callTimeout+slack)
	defer stop()
	handle(t, b.h, ctx, ev)
	if !raced || raceErr != nil {
		t.Fatalf("setup: the race before the release did not land (%v, %v)", raced, raceErr)
	}
	if !cancel && sum.ExpiredToUnknown != 1 {
		t.Fatalf("setup: the reconciler did not expire the marked lease: %+v", sum)
	}
	if parked && psm.Parked != 1 {
		t.Fatalf("setup: the second reconciler run did not park the task: %+v", psm)
	}
	if !strings.Contains(b.logs.String(), "too little time left before the call") {
		t.Fatal("setup: the worker did not stop for lack of time just before the call")
	}
	if calls := b.sim.Calls(task.TaskID); calls != 0 {
		t.Fatalf("setup: the provider was called %d time(s); this test wants the no-call path", calls)
	}
	if cancel {
		wantEndedCancelled(t, b, task.TaskID, "cancelled before any provider call")
		return
	}
	got := b.get(t, task.TaskID)
	if got.State != ledger.StateQueued || got.Attempts != 0 || got.ErrorClass != ledger.ErrorCallNotStarted {
		var known string
		if r, _ := b.l.GetReview(context.Background(), task.TaskID); r != nil {
			known = strings.Join(r.Known, " | ")
		}
		t.Fatalf("no provider call was made (the worker knew it), yet the task is %s (%s) with %d attempts and error %q; want queued, 0, %s; review known: %s",
			got.State, got.ReviewReason, got.Attempts, got.ErrorClass, ledger.ErrorCallNotStarted, known)
	}
	if parked {
		r, err := b.l.GetReview(context.Background(), task.TaskID)
		if err != nil || r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionRetry {
			t.Fatalf("the park's review: %+v, %v; want resolved as retry", r, err)
		}
	}
}
