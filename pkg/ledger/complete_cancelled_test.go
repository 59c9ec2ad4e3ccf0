package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCompleteCancelled: the worker fenced by a cancel of its own
// assignment saves the result it holds (completed, cancel_too_late); a
// stale version, a task the reconciler already decided, or a second save
// are refused and change nothing.
func TestCompleteCancelled(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "complete-cancelled")
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		cancelled, err := b.l.CancelRunning(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		var fe *ledger.FencedError
		_, err = b.l.Complete(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"text":"in hand"}`})
		if !errors.As(err, &fe) || !ledger.CancelledAt(fe, c.AssignmentVersion) {
			t.Fatalf("Complete after the cancel = %v; want *FencedError recognised by CancelledAt", err)
		}
		if ledger.CancelledAt(fe, c.AssignmentVersion-1) || ledger.CancelledAt(fe, c.AssignmentVersion+1) {
			t.Fatal("CancelledAt accepted another version")
		}
		// The version is the one the cancel left, not the claim's.
		if _, err := b.l.CompleteCancelled(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"text":"x"}`}); !errors.As(err, &fe) {
			t.Fatalf("CompleteCancelled at the claim's version = %v, want *FencedError", err)
		}
		got, err := b.l.CompleteCancelled(ctx, task.TaskID, cancelled.AssignmentVersion, ledger.Completion{Result: `{"text":"in hand"}`})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != ledger.StateCompleted || got.Result != `{"text":"in hand"}` || got.ErrorClass != ledger.ErrorCancelTooLate || got.CancelVersion != c.AssignmentVersion {
			t.Fatalf("after CompleteCancelled: %+v; want completed with the result, cancel_too_late, cancel_version kept", got)
		}
		if _, err := b.l.CompleteCancelled(ctx, task.TaskID, cancelled.AssignmentVersion, ledger.Completion{Result: `{"text":"other"}`}); !errors.As(err, &fe) {
			t.Fatalf("a second CompleteCancelled = %v, want *FencedError", err)
		}

		// Decided first by the reconciler (cancelled): nothing is saved.
		other := mustCreate(t, b, "complete-cancelled-late")
		oc, err := b.l.Claim(ctx, other.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		u, err := b.l.CancelRunning(ctx, oc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.CancelUnknown(ctx, other.TaskID, u.AssignmentVersion, "no call started"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.CompleteCancelled(ctx, other.TaskID, u.AssignmentVersion, ledger.Completion{Result: `{"text":"late"}`}); !errors.As(err, &fe) {
			t.Fatalf("CompleteCancelled after the reconciler cancelled = %v, want *FencedError", err)
		}
		if cur, _ := b.l.Get(ctx, other.TaskID); cur.State != ledger.StateCancelled || cur.HasResult() {
			t.Fatalf("after a refused CompleteCancelled: %s, result %v; want cancelled without a result", cur.State, cur.HasResult())
		}
	})
}

// TestCompleteCancelledLostReply: a CompleteCancelled whose reply was lost
// is recognised as applied (by the ledger's own repeat, or the
// caller's with the same nonce), never refused as fenced.
func TestCompleteCancelledLostReply(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := mustCreate(t, b, "complete-cancelled-lost-"+mode)
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		cancelled, err := b.l.CancelRunning(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		l, arm, lost := lossy(t, b, mode, "UpdateItem")
		nonce := ledger.WithNonce(ledger.NewNonce())
		arm()
		comp := ledger.Completion{Result: `{"text":"in hand"}`}
		got, err := l.CompleteCancelled(ctx, task.TaskID, cancelled.AssignmentVersion, comp, nonce)
		if err != nil {
			// Reported as unknown: the same write repeated is recognised.
			got, err = l.CompleteCancelled(ctx, task.TaskID, cancelled.AssignmentVersion, comp, nonce)
		}
		if err != nil || !lost() {
			t.Fatalf("repeat after a lost reply: %v (reply lost: %v); want it recognised as applied", err, lost())
		}
		if got.State != ledger.StateCompleted || got.Result != comp.Result {
			t.Fatalf("after the repeat: %s %q", got.State, got.Result)
		}
	})
}

// TestCancelUnknownAttempt: a task whose attempt lapsed to unknown can be
// cancelled like a running one (fenced, cancel_version = the lapsed
// version); a task already unknown because of a cancel cannot be cancelled
// again.
func TestCancelUnknownAttempt(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "cancel-lapsed")
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		u, err := b.l.MarkUnknown(ctx, task.TaskID, c.AssignmentVersion, "unknown_outcome", "lost reply")
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.l.CancelRunning(ctx, u)
		if err != nil {
			t.Fatalf("cancel of an unknown task: %v", err)
		}
		if got.State != ledger.StateUnknown || got.CancelVersion != c.AssignmentVersion || got.AssignmentVersion != c.AssignmentVersion+1 {
			t.Fatalf("after the cancel: %s, cancel_version %d, version %d; want unknown, %d, %d", got.State, got.CancelVersion, got.AssignmentVersion, c.AssignmentVersion, c.AssignmentVersion+1)
		}
		var ce *ledger.ConflictError
		if _, err := b.l.CancelRunning(ctx, got); !errors.As(err, &ce) {
			t.Fatalf("a second cancel of the cancelled unknown task = %v, want *ConflictError", err)
		}
	})
}
