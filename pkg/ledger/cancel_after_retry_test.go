package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCancelEndingsRefuseAnAttemptNoCancelFenced: cancel_version stays on
// the item after its cancel is decided. Once an operator has retried the
// cancel's unknown_outcome park and a worker has claimed the task again,
// the new attempt is no cancel's: ending it cancelled (CancelUnknown from
// unknown, CancelLapsed from its own unknown_outcome park) is refused, and
// CancelledWhileRunning says so, so that nothing ends cancelled a call the
// operator chose to run.
func TestCancelEndingsRefuseAnAttemptNoCancelFenced(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		c := claimed(t, b, "cancel-then-retry")
		u, err := b.l.CancelRunning(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if !u.CancelledWhileRunning() {
			t.Fatalf("after CancelRunning (version %d, cancel_version %d): CancelledWhileRunning = false", u.AssignmentVersion, u.CancelVersion)
		}
		if _, err := b.l.Park(ctx, u, ledger.ParkOptions{State: ledger.StateUnknown, Version: u.AssignmentVersion},
			ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "cancelled; no readback"}); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := b.l.Act(ctx, c.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops"}); err != nil {
			t.Fatal(err)
		}
		c2, err := b.l.Claim(ctx, c.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		u2, err := b.l.MarkUnknown(ctx, c.TaskID, c2.AssignmentVersion, "unknown_outcome", "reply lost")
		if err != nil {
			t.Fatal(err)
		}
		if u2.CancelledWhileRunning() {
			t.Fatalf("the retried attempt (version %d, cancel_version %d): CancelledWhileRunning = true", u2.AssignmentVersion, u2.CancelVersion)
		}
		var fe *ledger.FencedError
		if _, err := b.l.CancelUnknown(ctx, c.TaskID, u2.AssignmentVersion, "x"); !errors.As(err, &fe) {
			t.Fatalf("CancelUnknown of the retried attempt = %v, want *FencedError", err)
		}
		if _, err := b.l.Park(ctx, u2, ledger.ParkOptions{State: ledger.StateUnknown, Version: u2.AssignmentVersion},
			ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "no readback"}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.CancelLapsed(ctx, c.TaskID, u2.AssignmentVersion, "x", ledger.LapsedResolution{By: "worker w2", Note: "x"}); !errors.As(err, &fe) {
			t.Fatalf("CancelLapsed of the retried attempt's park = %v, want *FencedError", err)
		}
		if got, err := b.l.Get(ctx, c.TaskID); err != nil || got.State != ledger.StateNeedsReview {
			t.Fatalf("after the refused cancels: %v, %v; want needs_review", got, err)
		}
	})
}
