package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRepeatedOperatorRetryAfterReparkIsNoOp: an operator's retry is sent,
// applied, and its reply lost (the CLI exits 1, the HTTP call times out).
// The task runs again at once and its new attempt's outcome is unknown: it
// is parked again unknown_outcome (park 2), the provider may have acted. The
// operator repeats the command, as the CLI invites ("a repeated action is a
// no-op"). The repeat carries nothing that ties it to the park it was
// decided on (park 1), so Act applies it to park 2: the task is re-queued
// and its side effect may happen twice, on a decision nobody made about
// park 2 (DESIGN §1.4, "never blindly re-sent", and §1.6).
func TestRepeatedOperatorRetryAfterReparkIsNoOp(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "retry-repeat")
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Park(ctx, c, ledger.ParkOptions{State: ledger.StateRunning, Version: c.AssignmentVersion},
			ledger.Review{Reason: ledger.ReviewProviderConfig, Summary: "refused: credentials"}); err != nil {
			t.Fatal(err)
		}
		// The operator decides on the review item as read: park 1.
		rv, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		retry := ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops", Note: "credentials fixed", ParkCount: rv.ParkCount}
		if _, _, _, err := b.l.Act(ctx, task.TaskID, retry); err != nil { // applied; its reply is lost
			t.Fatal(err)
		}

		// The retried task runs; its call's reply is lost: parked again.
		c2, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Park(ctx, c2, ledger.ParkOptions{State: ledger.StateRunning, Version: c2.AssignmentVersion},
			ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "the provider may have acted"}); err != nil {
			t.Fatal(err)
		}

		// The operator repeats the command whose reply was lost.
		r, got, replayed, err := b.l.Act(ctx, task.TaskID, retry)
		if err != nil {
			t.Fatalf("repeated retry: %v", err)
		}
		if !replayed || got.State != ledger.StateNeedsReview {
			t.Fatalf("the repeat of a retry decided on park 1 was applied to park 2 (%s, park count %d): replayed=%v, task %s, review %s",
				ledger.ReviewUnknownOutcome, r.ParkCount, replayed, got.State, r.ReviewStatus)
		}
	})
}

// TestOperatorActionOnAnEarlierParkIsRefused: an action decided on park 1
// that park 1 cannot have been left by (a failure is terminal) must not
// decide park 2, which nobody has read: it is a *ConflictError naming both
// parks, and the task and its open review stay as they are.
func TestOperatorActionOnAnEarlierParkIsRefused(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "fail-after-repark")
		for park := 1; park <= 2; park++ {
			c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.l.Park(ctx, c, ledger.ParkOptions{State: ledger.StateRunning, Version: c.AssignmentVersion},
				ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "the provider may have acted"}); err != nil {
				t.Fatal(err)
			}
			if park == 1 {
				if _, _, _, err := b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops", ParkCount: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}

		_, _, _, err := b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops", Note: "gave up", ParkCount: 1})
		var ce *ledger.ConflictError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "park 1") || !strings.Contains(err.Error(), "park 2") {
			t.Fatalf("failed decided on park 1, task at park 2: want a *ConflictError naming both parks, got %v", err)
		}
		rv, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if rv.ReviewStatus != ledger.ReviewOpen || rv.ParkCount != 2 || got.State != ledger.StateNeedsReview {
			t.Fatalf("the refused action changed something: review %s at park %d, task %s", rv.ReviewStatus, rv.ParkCount, got.State)
		}
	})
}
