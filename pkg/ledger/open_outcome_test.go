package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// DeferReadback moves an unknown task's due_at (the reconciler's walk order)
// and nothing a worker's fenced write depends on: the state and the
// assignment version stay, and when the outcome became uncertain is kept
// (UnknownSince) across deferrals — also when the deferral's reply is
// lost and the write is recognised as the caller's own. Leaving unknown
// clears it, and a new uncertainty starts its own.
func TestDeferReadbackKeepsWhenTheOutcomeBecameUncertain(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := mustCreate(t, b, "defer-readback-"+mode)
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		u, err := b.l.MarkUnknown(ctx, task.TaskID, c.AssignmentVersion, "unknown_outcome", "reply lost")
		if err != nil {
			t.Fatal(err)
		}
		since := u.UnknownSince()
		for i := range 2 {
			b.clock.Advance(time.Minute)
			due := b.clock.Now().Add(-time.Second)
			l, arm, lost := lossy(t, b, mode, "UpdateItem")
			arm()
			d, err := l.DeferReadback(ctx, task.TaskID, c.AssignmentVersion, u.UnknownSince(), due)
			if !lost() {
				t.Fatal("the fault was not injected")
			}
			if err != nil {
				t.Fatalf("deferral %d after a lost reply = %v; want its own write recognised", i+1, err)
			}
			if u, err = b.l.Get(ctx, task.TaskID); err != nil {
				t.Fatal(err)
			}
			for _, got := range []*ledger.Task{d, u} {
				if got.State != ledger.StateUnknown || got.AssignmentVersion != c.AssignmentVersion || got.DueAt != due.UnixMilli() || !got.UnknownSince().Equal(since) {
					t.Fatalf("deferral %d: %s v%d due %d since %v; want unknown v%d due %d since %v",
						i+1, got.State, got.AssignmentVersion, got.DueAt, got.UnknownSince(), c.AssignmentVersion, due.UnixMilli(), since)
				}
			}
		}
		if _, err := b.l.DeferReadback(ctx, task.TaskID, c.AssignmentVersion+1, since, b.clock.Now()); !isFenced(err) {
			t.Fatalf("DeferReadback at another version = %v, want fenced", err)
		}
		r, err := b.l.Requeue(ctx, task.TaskID, ledger.StateUnknown, c.AssignmentVersion)
		if err != nil {
			t.Fatal(err)
		}
		if r.UnknownSinceMs != 0 {
			t.Fatalf("re-queued from unknown, unknown_since %d stays; want it cleared", r.UnknownSinceMs)
		}
		b.clock.Advance(time.Minute)
		c, err = b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if u, err = b.l.MarkUnknown(ctx, task.TaskID, c.AssignmentVersion, "unknown_outcome", "reply lost again"); err != nil {
			t.Fatal(err)
		}
		if !u.UnknownSince().Equal(b.clock.Now().Truncate(time.Millisecond)) {
			t.Fatalf("a second uncertainty since %v; want %v (its own)", u.UnknownSince(), b.clock.Now())
		}
	})
}

// A takeover (Claim with AllowTakeover, refused as a plain claim by a
// running task whose lease expired) leaves the attempt it takes over with
// an open outcome: open_unknown_ms at that lease's end, kept through a
// later attempt's error, and the attempt in the history as unknown — also
// when the takeover's reply is lost and the write is recognised as the
// caller's own. A takeover of an unexpired lease, or at a version the
// caller did not read, writes nothing.
func TestTakeOverLeavesTheTakenAttemptsOutcomeOpen(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := mustCreate(t, b, "takeover-open-"+mode)
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		opts := ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second, AllowTakeover: true}
		if _, err := b.l.Claim(ctx, task.TaskID, opts); !isNotClaimable(err, ledger.ReasonLeased) {
			t.Fatalf("takeover of a held lease = %v; want leased", err)
		}
		b.clock.Advance(31 * time.Second)
		stale := *c
		stale.AssignmentVersion--
		if _, err := b.l.TakeOver(ctx, &stale, opts); err == nil {
			t.Fatal("a takeover at a version the caller did not read was applied")
		}
		l, arm, lost := lossy(t, b, mode, "UpdateItem")
		arm()
		got, err := l.Claim(ctx, task.TaskID, opts)
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("takeover after a lost reply = %v; want its own write recognised", err)
		}
		if got.AssignmentVersion != c.AssignmentVersion+1 || got.Attempts != 2 || got.OpenUnknownMs != c.LeaseUntil {
			t.Fatalf("taken over: v%d attempt %d open since %d; want v%d, attempt 2, open since %d (the lease's end)",
				got.AssignmentVersion, got.Attempts, got.OpenUnknownMs, c.AssignmentVersion+1, c.LeaseUntil)
		}
		if h := got.History(); len(h) != 2 || h[0].Outcome != ledger.OutcomeUnknown || h[0].EndedMs != c.LeaseUntil {
			t.Fatalf("history after the takeover: %+v; want attempt 1 unknown, ended at its lease's end", h)
		}
		r, err := b.l.ScheduleRetry(ctx, task.TaskID, got.AssignmentVersion, b.clock.Now().Add(time.Second), "throttled", "429", ledger.InAttempt(got))
		if err != nil {
			t.Fatal(err)
		}
		if since, open := r.OpenUncertainty(); !open || since.UnixMilli() != c.LeaseUntil {
			t.Fatalf("after attempt 2's retry: open %v since %v; want attempt 1's outcome still open since its lease's end", open, since)
		}
	})
}

func isNotClaimable(err error, reason string) bool {
	var nc *ledger.NotClaimableError
	return errors.As(err, &nc) && nc.Reason == reason
}

// A worker whose lapsed attempt leaves the task live — it gives back an
// attempt it never called (ReleaseLapsed), or its provider refused the
// call without acting (RetryLapsed) — restores the earlier attempt's open
// outcome, which the park in between folded into its review, from the
// task it claimed (InAttempt): this attempt's answer does not settle the
// question that attempt left, and a later readback or park must still
// ask it.
func TestLapsedSettlementsThatLeaveTheTaskLiveKeepAnEarlierOpenOutcome(t *testing.T) {
	t.Parallel()
	settle := map[string]func(b *bundle, id string, v int64, r ledger.LapsedResolution, o ledger.WriteOption) (*ledger.Task, error){
		"release": func(b *bundle, id string, v int64, r ledger.LapsedResolution, o ledger.WriteOption) (*ledger.Task, error) {
			return b.l.ReleaseLapsed(context.Background(), id, v, r, o)
		},
		"retry": func(b *bundle, id string, v int64, r ledger.LapsedResolution, o ledger.WriteOption) (*ledger.Task, error) {
			return b.l.RetryLapsed(context.Background(), id, v, b.clock.Now().Add(time.Second), "provider_unavailable", "503", r, o)
		},
	}
	want := map[string]ledger.State{"release": ledger.StateQueued, "retry": ledger.StateRetryWait}
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		for name, fn := range settle {
			task := mustCreate(t, b, "lapsed-open-"+name)
			c1, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			b.clock.Advance(31 * time.Second)
			c2, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second, AllowTakeover: true})
			if err != nil || c2.OpenUnknownMs != c1.LeaseUntil {
				t.Fatalf("%s: takeover: %+v, %v; want attempt 1's outcome open since %d", name, c2, err, c1.LeaseUntil)
			}
			b.clock.Advance(31 * time.Second)
			u, err := b.l.ExpireToUnknown(ctx, task.TaskID, c2.AssignmentVersion)
			if err != nil {
				t.Fatal(err)
			}
			p, err := b.l.Park(ctx, u, ledger.ParkOptions{State: ledger.StateUnknown, Version: c2.AssignmentVersion},
				ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "may have acted"})
			if err != nil || p.OpenUnknownMs != 0 { // the review carries the question while parked
				t.Fatalf("%s: park: %+v, %v; want the open outcome folded into the review", name, p, err)
			}
			res := ledger.LapsedResolution{By: "worker w2", Note: "the provider did not act on attempt 2"}
			got, err := fn(b, task.TaskID, c2.AssignmentVersion, res, ledger.InAttempt(c2))
			if err != nil {
				t.Fatal(err)
			}
			if since, open := got.OpenUncertainty(); got.State != want[name] || !open || since.UnixMilli() != c1.LeaseUntil {
				t.Fatalf("%s: settled %s, open %v since %v; want %s with attempt 1's outcome open since %d",
					name, got.State, open, since, want[name], c1.LeaseUntil)
			}
		}
	})
}

// expiredClaim creates a task, claims it for w1 with a 30 s lease and
// moves the clock past that lease.
func expiredClaim(t *testing.T, b *bundle, key string) (task, claimed *ledger.Task) {
	t.Helper()
	task = mustCreate(t, b, key)
	claimed, err := b.l.Claim(context.Background(), task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(31 * time.Second)
	return task, claimed
}

// An open outcome left by a worker that saw its call end and retried it
// under the same key (ScheduleRetryUncertain) — also when that write's
// reply is lost and it is recognised as the caller's own — is told apart
// from one left by an attempt whose lease lapsed (Requeue), whose call
// may still run: the retry is recorded as a retry after unknown_outcome,
// ended at the open outcome's time (WorkerEndedOpenOutcome); the lapsed
// attempt's open outcome, kept through a later worker's retry, is not.
func TestAWorkerRetriedOpenOutcomeIsToldApartFromALapsedOne(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := mustCreate(t, b, "worker-ended-open-"+mode)
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(5 * time.Second)
		l, arm, lost := lossy(t, b, mode, "UpdateItem")
		arm()
		r, err := l.ScheduleRetryUncertain(ctx, task.TaskID, c.AssignmentVersion, b.clock.Now().Add(time.Second), "reply lost", ledger.InAttempt(c))
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("retry after a lost reply = %v; want its own write recognised", err)
		}
		if since, open := r.OpenUncertainty(); !open || since.UnixMilli() != b.clock.Now().UnixMilli() || !r.WorkerEndedOpenOutcome() {
			t.Fatalf("after the worker's retry: open %v since %v, worker-ended %v; want open since the retry, ended by its worker",
				open, since, r.WorkerEndedOpenOutcome())
		}

		lapsed := mustCreate(t, b, "lapsed-open-"+mode)
		c1, err := b.l.Claim(ctx, lapsed.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(31 * time.Second)
		if _, err := b.l.Requeue(ctx, lapsed.TaskID, ledger.StateRunning, c1.AssignmentVersion, ledger.InAttempt(c1)); err != nil {
			t.Fatal(err)
		}
		c2, err := b.l.Claim(ctx, lapsed.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(5 * time.Second)
		r2, err := b.l.ScheduleRetryUncertain(ctx, lapsed.TaskID, c2.AssignmentVersion, b.clock.Now().Add(time.Second), "reply lost", ledger.InAttempt(c2))
		if err != nil {
			t.Fatal(err)
		}
		if since, open := r2.OpenUncertainty(); !open || since.UnixMilli() != c1.LeaseUntil || r2.WorkerEndedOpenOutcome() {
			t.Fatalf("after a lapsed attempt and a worker's retry: open %v since %v, worker-ended %v; want attempt 1's outcome open since its lease's end, not ended by a worker",
				open, since, r2.WorkerEndedOpenOutcome())
		}
	})
}
