package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// ReleaseRequeued gives back an assignment the reconciler re-queued after
// its lease lapsed (Requeue from running: the attempt counted, its outcome
// open, recorded unknown in the history) when its worker knows it made no
// call: the attempt is given back and what the lapse recorded is void,
// while an earlier attempt's open outcome, history entry and error — as
// the worker's claim read them (InAttempt) — stand. It is refused once
// the attempt was given back, at another version, and after a new claim;
// a lost reply is recognised as the caller's own write.
func TestReleaseRequeuedVoidsOnlyTheLapseOfTheCallersAttempt(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		const lease = 30 * time.Second
		task := mustCreate(t, b, "release-requeued-"+mode)
		// Attempt 1 lapses and is re-queued; attempt 2 lapses the same way,
		// but its worker made no call.
		c2 := secondClaimAfterARequeuedLapse(t, b, task.TaskID, lease)
		if c2.ErrorClass != ledger.ReasonUnknown {
			t.Fatalf("setup: attempt 2's claim reads open_unknown_ms %d, error %q; want attempt 1's outcome open", c2.OpenUnknownMs, c2.ErrorClass)
		}
		b.clock.Advance(lease + time.Second)
		if _, err := b.l.ReleaseRequeued(ctx, task.TaskID, c2.AssignmentVersion, ledger.InAttempt(c2)); !isFenced(err) {
			t.Fatalf("ReleaseRequeued of a running task = %v, want fenced (Release is the running task's)", err)
		}
		if _, err := b.l.Requeue(ctx, task.TaskID, ledger.StateRunning, c2.AssignmentVersion, ledger.InAttempt(c2)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.ReleaseRequeued(ctx, task.TaskID, c2.AssignmentVersion-1, ledger.InAttempt(c2)); !isFenced(err) {
			t.Fatalf("ReleaseRequeued at another version = %v, want fenced", err)
		}

		l, arm, lost := lossy(t, b, mode, "UpdateItem")
		arm()
		r, err := l.ReleaseRequeued(ctx, task.TaskID, c2.AssignmentVersion, ledger.InAttempt(c2))
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("ReleaseRequeued after a lost reply = %v; want its own write recognised", err)
		}
		stored, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []*ledger.Task{r, stored} {
			if got.State != ledger.StateQueued || got.Attempts != 1 || got.AssignmentVersion != c2.AssignmentVersion {
				t.Fatalf("released: %s, attempts %d, version %d; want queued with attempt 1 alone counted, at %d", got.State, got.Attempts, got.AssignmentVersion, c2.AssignmentVersion)
			}
			if got.OpenUnknownMs != c2.OpenUnknownMs || got.ErrorClass != c2.ErrorClass || got.ErrorMessage != c2.ErrorMessage {
				t.Errorf("released: open_unknown_ms %d, error %q %q; want attempt 1's: %d, %q %q",
					got.OpenUnknownMs, got.ErrorClass, got.ErrorMessage, c2.OpenUnknownMs, c2.ErrorClass, c2.ErrorMessage)
			}
			h := got.History()
			if len(h) != 1 || h[0].Attempt != 1 || h[0].Outcome != ledger.OutcomeUnknown {
				t.Errorf("released: history %+v; want attempt 1 alone, unknown", h)
			}
		}
		if _, err := b.l.ReleaseRequeued(ctx, task.TaskID, c2.AssignmentVersion, ledger.InAttempt(c2)); !isFenced(err) {
			t.Fatalf("released twice: %v", err)
		}
		c3, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w3", Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		if c3.Attempts != 2 {
			t.Fatalf("reclaimed: attempts %d, want 2 (the given-back attempt is not counted)", c3.Attempts)
		}
		if _, err := b.l.ReleaseRequeued(ctx, task.TaskID, c2.AssignmentVersion, ledger.InAttempt(c2)); !isFenced(err) {
			t.Fatalf("ReleaseRequeued after a new claim = %v, want fenced", err)
		}
	})
}

// A re-queue after a readback found nothing has settled every attempt's
// outcome (the readback is by operation id): ReleaseRequeued is refused
// there and reopens nothing the readback closed.
func TestReleaseRequeuedIsRefusedAfterAReadbackFoundNothing(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "release-requeued-read-back")
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(31 * time.Second)
		if _, err := b.l.ExpireToUnknown(ctx, task.TaskID, c.AssignmentVersion, ledger.InAttempt(c)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Requeue(ctx, task.TaskID, ledger.StateUnknown, c.AssignmentVersion); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.ReleaseRequeued(ctx, task.TaskID, c.AssignmentVersion, ledger.InAttempt(c)); !isFenced(err) {
			t.Fatalf("ReleaseRequeued after a readback's re-queue = %v, want fenced", err)
		}
		if got, err := b.l.Get(ctx, task.TaskID); err != nil || got.ErrorClass != ledger.ErrorReadbackAbsent || got.Attempts != 1 {
			t.Fatalf("after the refused give-back: %+v, %v; want the readback's re-queue unchanged", got, err)
		}
	})
}

// A lapse the reconciler re-queued with no call started under it
// (RequeueUnstarted: a provider without idempotency keys, no call-start
// mark at the assignment) keeps its attempt counted and leaves no outcome
// open. Its worker, stalled after the claim, knows it made no call:
// ReleaseRequeued gives the attempt back, as after a re-queue that left
// the outcome open — else the task is charged an attempt no call was made
// under, and its budget ends a call early (DESIGN §1.5).
func TestReleaseRequeuedGivesBackALapseRequeuedUnstarted(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "release-requeued-unstarted")
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(31 * time.Second)
		q, err := b.l.RequeueUnstarted(ctx, task.TaskID, c.AssignmentVersion)
		if err != nil {
			t.Fatal(err)
		}
		if q.State != ledger.StateQueued || q.Attempts != 1 {
			t.Fatalf("setup: re-queued unstarted: %s with %d attempts, want queued with the attempt counted", q.State, q.Attempts)
		}
		if !ledger.RequeuedAt(q, c.AssignmentVersion) {
			t.Errorf("RequeuedAt = false for a lapse re-queued unstarted at the worker's version")
		}
		if _, err := b.l.ReleaseRequeued(ctx, task.TaskID, c.AssignmentVersion, ledger.InAttempt(c)); err != nil {
			t.Errorf("ReleaseRequeued of a lapse re-queued unstarted = %v, want the attempt given back", err)
		}
		got, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != ledger.StateQueued || got.Attempts != 0 {
			t.Errorf("after the give-back: %s with %d attempts, want queued with none counted", got.State, got.Attempts)
		}
		if _, open := got.OpenUncertainty(); open {
			t.Errorf("after the give-back: an outcome is open (open_unknown_ms %d, error %q), though no call was made", got.OpenUnknownMs, got.ErrorClass)
		}
	})
}

// secondClaimAfterARequeuedLapse lets attempt 1 of task id lapse (a lease
// of lease) and the reconciler re-queue it with its outcome open (Requeue
// from running), then claims attempt 2, which reads that open outcome.
func secondClaimAfterARequeuedLapse(t *testing.T, b *bundle, id string, lease time.Duration) *ledger.Task {
	t.Helper()
	ctx := context.Background()
	c1, err := b.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "w1", Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(lease + time.Second)
	if _, err := b.l.Requeue(ctx, id, ledger.StateRunning, c1.AssignmentVersion, ledger.InAttempt(c1)); err != nil {
		t.Fatal(err)
	}
	c2, err := b.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "w2", Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	if c2.Attempts != 2 || c2.OpenUnknownMs == 0 {
		t.Fatalf("setup: attempt 2's claim: attempts %d, open_unknown_ms %d; want 2 with attempt 1's outcome open", c2.Attempts, c2.OpenUnknownMs)
	}
	return c2
}
