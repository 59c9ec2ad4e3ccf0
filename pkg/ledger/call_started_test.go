package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestMarkCallStartedIsFenced: the call-start mark is written only by the
// holder of the running assignment, renews its lease, and is left alone by
// the next Claim, so it equals the assignment version only when the current
// assignment's call started.
func TestMarkCallStartedIsFenced(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "call-started")
		c1, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c1.CallStartedVersion != 0 {
			t.Fatalf("a fresh claim carries call_started_version %d", c1.CallStartedVersion)
		}
		b.clock.Advance(10 * time.Second)
		m, err := b.l.MarkCallStarted(ctx, task.TaskID, c1.AssignmentVersion, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		wantUntil := b.clock.Now().Add(time.Minute).UnixMilli()
		if m.CallStartedVersion != c1.AssignmentVersion || m.State != ledger.StateRunning || m.Attempts != 1 ||
			m.LeaseUntil != wantUntil || m.DueAt != wantUntil {
			t.Fatalf("marked task: call_started_version %d (want %d), state %s, attempts %d, lease_until %d, due_at %d (want %d)",
				m.CallStartedVersion, c1.AssignmentVersion, m.State, m.Attempts, m.LeaseUntil, m.DueAt, wantUntil)
		}

		// The attempt is given back and claimed anew: the mark stays at the
		// old version, so it does not speak for the new assignment.
		if _, err := b.l.Release(ctx, task.TaskID, c1.AssignmentVersion); err != nil {
			t.Fatal(err)
		}
		c2, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c2.CallStartedVersion != c1.AssignmentVersion || c2.AssignmentVersion == c2.CallStartedVersion {
			t.Fatalf("after a new claim: call_started_version %d, version %d; want the old mark %d kept and unequal",
				c2.CallStartedVersion, c2.AssignmentVersion, c1.AssignmentVersion)
		}

		// The old holder is fenced and writes nothing.
		_, err = b.l.MarkCallStarted(ctx, task.TaskID, c1.AssignmentVersion, time.Minute)
		var fe *ledger.FencedError
		if !errors.As(err, &fe) || fe.Why != "taken_over" {
			t.Fatalf("stale MarkCallStarted = %v, want *FencedError taken_over", err)
		}
		if got := mustGet(t, b, task.TaskID); got.CallStartedVersion != c1.AssignmentVersion || got.LeaseOwner != "w2" {
			t.Fatalf("a fenced mark changed the task: call_started_version %d, owner %q", got.CallStartedVersion, got.LeaseOwner)
		}

		// Not running any more: fenced too.
		if _, err := b.l.Complete(ctx, task.TaskID, c2.AssignmentVersion, ledger.Completion{Result: `{"text":"hi"}`}); err != nil {
			t.Fatal(err)
		}
		_, err = b.l.MarkCallStarted(ctx, task.TaskID, c2.AssignmentVersion, time.Minute)
		if !errors.As(err, &fe) || fe.Why != "already_completed" {
			t.Fatalf("MarkCallStarted on a completed task = %v, want *FencedError already_completed", err)
		}
	})
}

// TestMarkCallStartedRecognisesALostReply: a mark whose reply was lost
// (inside the SDK's retries, or after them) is returned as written, never
// as a fence.
func TestMarkCallStartedRecognisesALostReply(t *testing.T) {
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := mustCreate(t, b, "call-started-lost-"+mode)
		claimed, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "me", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		l, arm, lost := lossy(t, b, mode, "UpdateItem")
		arm()
		got, err := l.MarkCallStarted(ctx, task.TaskID, claimed.AssignmentVersion, time.Minute, ledger.WithNonce(ledger.NewNonce()))
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("MarkCallStarted after a lost reply = %v; want its own write recognised", err)
		}
		if got.CallStartedVersion != claimed.AssignmentVersion || got.State != ledger.StateRunning {
			t.Fatalf("returned call_started_version %d state %s, want %d running", got.CallStartedVersion, got.State, claimed.AssignmentVersion)
		}
		if stored := mustGet(t, b, task.TaskID); stored.CallStartedVersion != claimed.AssignmentVersion {
			t.Fatalf("stored call_started_version %d, want %d", stored.CallStartedVersion, claimed.AssignmentVersion)
		}
	})
}

// TestRequeueUnstartedNeedsTheMarkAbsent: the reconciler's re-queue of an
// expired lease without a call start is refused once the assignment
// recorded its call start, and applied while it has not.
func TestRequeueUnstartedNeedsTheMarkAbsent(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		marked := mustCreate(t, b, "requeue-unstarted-marked")
		plain := mustCreate(t, b, "requeue-unstarted-plain")
		cm, err := b.l.Claim(ctx, marked.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := b.l.Claim(ctx, plain.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.MarkCallStarted(ctx, cm.TaskID, cm.AssignmentVersion, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
		if _, err := b.l.RequeueUnstarted(ctx, cm.TaskID, cm.AssignmentVersion); !errors.As(err, new(*ledger.FencedError)) {
			t.Fatalf("RequeueUnstarted of a marked assignment = %v, want *FencedError", err)
		}
		if got := mustGet(t, b, cm.TaskID); got.State != ledger.StateRunning {
			t.Fatalf("marked task %s after the refused re-queue, want running", got.State)
		}
		got, err := b.l.RequeueUnstarted(ctx, cp.TaskID, cp.AssignmentVersion)
		if err != nil || got.State != ledger.StateQueued {
			t.Fatalf("RequeueUnstarted of an unmarked assignment = %v, %v; want queued", got, err)
		}
	})
}
