package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// noCallAfterExpiry runs the no-call-after-expiry scenario: a worker
// whose writes after the call-start mark hang while the reconciler
// expires its lease to unknown — and, parked, parks it unknown_outcome —
// so that it makes no provider call. wire installs the scenario's faults
// on b.h (its ledger, its admission) and calls expire(d) where the
// reconciler runs: the clock moves d and the reconciler runs once (twice,
// two minutes apart, parked). The provider has no idempotency keys and no
// readback (Bedrock-like); the task has one attempt.
//
// It checks that the worker made no call and gave the task back from
// where the reconciler put it — queued, its attempt given back, error
// call_not_started, a park resolved as retry — never left it to be parked
// saying its call was started, and that the next delivery makes the one
// call. It returns the bundle, for checks of the scenario's own.
func noCallAfterExpiry(t *testing.T, e *testenv.Env, key string, parked bool, wire func(b *bundle, task *ledger.Task, expire func(d time.Duration))) *bundle {
	t.Helper()
	b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
	ctx := context.Background()
	g := newGate(b.sim)
	b.h.Provider = g
	b.h.CallTimeout = b.sim.CallTimeout()
	task := b.create(t, key, prompt, func(n *ledger.NewTask) { n.MaxAttempts = 1 })

	var (
		recSum, parkSum reconciler.Summary
		recErr, parkErr error
		recRan          bool
	)
	wire(b, task, func(d time.Duration) {
		b.clock.Advance(d)
		recSum, recErr = b.reconcileG(b.sim)
		recRan = true
		if parked {
			b.clock.Advance(2 * time.Minute)
			parkSum, parkErr = b.reconcileG(b.sim)
		}
	})

	b.send(t, task.TaskID)
	ev := b.deliver(t, 1, 120)
	first := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := b.h.Handle(ctx, ev); first <- resp }()
	await(t, first)

	if !recRan || recErr != nil || recSum.ExpiredToUnknown != 1 {
		t.Fatalf("setup: the reconciler did not expire the marked lease while the worker's write hung (ran %v, err %v, %+v)", recRan, recErr, recSum)
	}
	if parked && (parkErr != nil || parkSum.Parked != 1) {
		t.Fatalf("setup: the second reconciler run did not park the unknown task (err %v, %+v)", parkErr, parkSum)
	}
	select {
	case <-g.started:
		t.Fatal("the provider was called after the lease was expired to unknown")
	default:
	}
	if n := b.sim.SideEffects(task.TaskID); n != 0 {
		t.Fatalf("setup: %d side effects, want none (no call was made)", n)
	}
	got := b.get(t, task.TaskID)
	if got.State != ledger.StateQueued || got.Attempts != 0 || got.ErrorClass != ledger.ErrorCallNotStarted {
		var known string
		if r, _ := b.l.GetReview(ctx, task.TaskID); r != nil {
			known = strings.Join(r.Known, " | ")
		}
		t.Fatalf("no provider call was made (the worker knew it), yet the task is %s (%s) with %d attempts and error %q; want queued, 0, %s; review known: %s",
			got.State, got.ReviewReason, got.Attempts, got.ErrorClass, ledger.ErrorCallNotStarted, known)
	}
	if parked {
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil || r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionRetry || !strings.Contains(r.ResolutionNote, "made no provider call") {
			t.Fatalf("the park's review: %+v, %v; want resolved as retry, saying no call was made", r, err)
		}
	}
	// The next delivery makes the one call: the attempt was given back.
	h2 := b.handler(b.l, b.sim)
	h2.CallTimeout = b.sim.CallTimeout()
	b.send(t, task.TaskID)
	handle(t, h2, ctx, b.deliver(t, 1, 60))
	if got := b.get(t, task.TaskID); got.State != ledger.StateCompleted || b.sim.SideEffects(task.TaskID) != 1 {
		t.Fatalf("the task ended %s (%s) with %d side effects; want completed with 1", got.State, got.ReviewReason, b.sim.SideEffects(task.TaskID))
	}
	return b
}

// eachParked runs fn with parked false ("unknown") and true ("parked").
func eachParked(t *testing.T, fn func(t *testing.T, parked bool)) {
	for _, parked := range []bool{false, true} {
		name := "unknown"
		if parked {
			name = "parked"
		}
		t.Run(name, func(t *testing.T) { fn(t, parked) })
	}
}

// wantEndedCancelled fails t unless the task ended cancelled by what its
// worker knew (what: why it must have), with no reconciler run after the
// worker's: the reconciler's cancel rule would park a marked attempt
// unknown_outcome.
func wantEndedCancelled(t *testing.T, b *bundle, id, what string) {
	t.Helper()
	got := b.get(t, id)
	if got.State == ledger.StateCancelled {
		return
	}
	var known, uncertain string
	if r, _ := b.l.GetReview(context.Background(), id); r != nil {
		known, uncertain = strings.Join(r.Known, " | "), strings.Join(r.Uncertain, " | ")
	}
	t.Fatalf("%s (the worker knew), yet the worker left the task %s (review %q, error %q); want cancelled.\nreview known: %s\nreview uncertain: %s",
		what, got.State, got.ReviewReason, got.ErrorClass, known, uncertain)
}

// raceTheSave makes something happen to task id after the provider
// answered and before the worker's write (an AfterProvider hook on b.h):
// "cancel", the caller cancels it (CancelRunning); "lapsed", the
// reconciler expires the slow worker's lease (the clock a minute on,
// ExpireToUnknown); any other mode, nothing. Call the returned check after
// the delivery: it fails t when the hook's write failed.
func raceTheSave(t *testing.T, b *bundle, id, mode string) func() {
	t.Helper()
	var hookErr error
	if mode == "cancel" || mode == "lapsed" {
		b.h.Hooks = &worker.Hooks{AfterProvider: func(_ context.Context, got string) error {
			if got != id {
				return nil
			}
			cur, err := b.l.Get(context.Background(), id)
			switch {
			case err != nil:
				hookErr = err
			case mode == "cancel":
				_, hookErr = b.l.CancelRunning(context.Background(), cur)
			default:
				b.clock.Advance(time.Minute) // the lease and its grace are past
				_, hookErr = b.l.ExpireToUnknown(context.Background(), id, cur.AssignmentVersion)
			}
			return nil // the worker goes on: the race landed first
		}}
	}
	return func() {
		t.Helper()
		if hookErr != nil {
			t.Fatalf("setup: %s before the worker's write: %v", mode, hookErr)
		}
	}
}

// wantRefusalSettled fails t unless the worker, told its call was refused
// (what) after raceTheSave's mode, settled the task by itself: retry_wait
// after a lapsed lease, cancelled after a cancel. On a failure the
// reconciler (reconcile) runs a few periods on, for the message: what it
// made of the task the worker left.
func wantRefusalSettled(t *testing.T, b *bundle, id, mode string, reconcile func(), what string) {
	t.Helper()
	afterWorker := b.get(t, id)
	want := map[string]ledger.State{"lapsed": ledger.StateRetryWait, "cancel": ledger.StateCancelled}[mode]
	if afterWorker.State == want {
		return
	}
	got := afterWorker
	for i := 0; i < 5 && got.State.Live() && got.State != ledger.StateRetryWait; i++ {
		b.clock.Advance(time.Minute)
		reconcile()
		got = b.get(t, id)
	}
	var uncertain string
	if r, _ := b.l.GetReview(context.Background(), id); r != nil {
		uncertain = strings.Join(r.Uncertain, " | ")
	}
	t.Fatalf("%s; after the worker the task is %s (error %q), then the reconciler made it %s (review %q), uncertain: %q — want %s",
		what, afterWorker.State, afterWorker.ErrorClass, got.State, got.ReviewReason, uncertain, want)
}
