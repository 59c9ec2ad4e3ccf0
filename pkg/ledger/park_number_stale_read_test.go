package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestParkFromAReadTakenBeforeAParkAndRetryIsNumberedTheSecondPark: an
// operator retry leaves a parked task queued at the assignment version it
// was parked at, so a park decided on a read of the queued task from
// before that park (another reconciler run, a worker whose claim was
// refused for its budget) still applies afterwards. It is the task's
// second park: its number must be 2 — on the task, on the review item and
// in every command the review suggests — and the resolve copied from the
// first review (--park 1) must not decide it. Park counts from the read
// (park_count 0, plus one) and no condition holds that count, so the
// second park is numbered 1 again.
func TestParkFromAReadTakenBeforeAParkAndRetryIsNumberedTheSecondPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "park-number-stale-read")
		stale, err := b.l.Get(ctx, task.TaskID) // queued, never parked
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Park(ctx, stale, ledger.ParkOptions{State: stale.State, Version: stale.AssignmentVersion}, suggesting(task.TaskID, ledger.ReviewBudgetExhausted)); err != nil {
			t.Fatalf("first park: %v", err)
		}
		if _, _, _, err := b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "op", ParkCount: 1}); err != nil {
			t.Fatalf("operator retry of park 1: %v", err)
		}
		// The park decided on the read from before the first park.
		_, err = b.l.Park(ctx, stale, ledger.ParkOptions{State: stale.State, Version: stale.AssignmentVersion}, suggesting(task.TaskID, ledger.ReviewBudgetExhausted))
		var ce *ledger.ConflictError
		if errors.As(err, &ce) {
			return // refused: held to the park it read, so no second park to number
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ParkCount != 2 {
			t.Errorf("the task's second park is recorded as park_count %d, want 2", got.ParkCount)
		}
		testenv.WantReviewCommandsAt(t, r, 2)
		_, _, _, err = b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionFailed, Note: "copied from park 1's review", By: "op", ParkCount: 1})
		if !errors.As(err, &ce) {
			after, _ := b.l.Get(ctx, task.TaskID)
			t.Fatalf("park 1's copied resolve on the second park: %v, task now %s; want a *ConflictError, nothing changed", err, after.State)
		}
	})
}
