package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// parkedUnknown claims a task as worker "w", lets its lease expire, moves it
// to unknown and parks it unknown_outcome, as the reconciler does for a
// provider without readback. It returns the worker's claim.
func parkedUnknown(t *testing.T, b *bundle, key string) *ledger.Task {
	t.Helper()
	ctx := context.Background()
	task := mustCreate(t, b, key)
	c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	u, err := b.l.ExpireToUnknown(ctx, task.TaskID, c.AssignmentVersion)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.Park(ctx, u, ledger.ParkOptions{State: ledger.StateUnknown, Version: u.AssignmentVersion},
		ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "lapsed"}); err != nil {
		t.Fatal(err)
	}
	return c
}

var lapsedBy = ledger.LapsedResolution{By: "worker w", Note: "the result of attempt 1 arrived after the park"}

// TestCompleteLapsedSavesAndResolves: the worker whose task was parked
// unknown_outcome at its own version saves its result; the task completes
// and the review item is resolved as completed by the worker, in one
// transaction. An operator acting afterwards sees it resolved.
func TestCompleteLapsedSavesAndResolves(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		c := parkedUnknown(t, b, "lapsed-ok")
		got, err := b.l.CompleteLapsed(ctx, c.TaskID, c.AssignmentVersion,
			ledger.Completion{Result: `{"r":1}`, Provider: "sim", ProviderRef: "ref-1"}, lapsedBy)
		if err != nil {
			t.Fatalf("CompleteLapsed: %v", err)
		}
		if got.State != ledger.StateCompleted || got.Result != `{"r":1}` || got.ProviderRef != "ref-1" || got.ExpiresAt == 0 || got.StateShard != "" {
			t.Fatalf("task = %s result %q ref %q expires %d shard %q", got.State, got.Result, got.ProviderRef, got.ExpiresAt, got.StateShard)
		}
		r, err := b.l.GetReview(ctx, c.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionCompleted ||
			r.ResolvedBy != lapsedBy.By || r.ResolutionNote != lapsedBy.Note || r.ResolvedAt == "" || r.ExpiresAt == 0 {
			t.Fatalf("review = %+v, want resolved completed by the worker", r)
		}
		// An operator's retry of the (now resolved) item conflicts.
		_, _, _, err = b.l.Act(ctx, c.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "op"})
		if !errors.As(err, new(*ledger.ConflictError)) {
			t.Fatalf("operator retry after the lapsed save: %v, want *ConflictError", err)
		}
		// Saving again is fenced (already completed), not a second result.
		_, err = b.l.CompleteLapsed(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"r":2}`}, lapsedBy)
		var fe *ledger.FencedError
		if !errors.As(err, &fe) || fe.Why != "already_completed" {
			t.Fatalf("second CompleteLapsed: %v, want fenced already_completed", err)
		}
	})
}

// TestCompleteLapsedIsFenced: the lapsed save applies only to a task parked
// unknown_outcome at the caller's version with its review still open.
func TestCompleteLapsedIsFenced(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		t.Run("operator_first", func(t *testing.T) {
			b := setup(t, e)
			c := parkedUnknown(t, b, "lapsed-op-first")
			if _, _, _, err := b.l.Act(ctx, c.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionFailed, Note: "gave up", By: "op"}); err != nil {
				t.Fatal(err)
			}
			_, err := b.l.CompleteLapsed(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"r":1}`}, lapsedBy)
			if !errors.As(err, new(*ledger.FencedError)) {
				t.Fatalf("CompleteLapsed after the operator resolved: %v, want *FencedError", err)
			}
			got, _ := b.l.Get(ctx, c.TaskID)
			r, _ := b.l.GetReview(ctx, c.TaskID)
			if got.State != ledger.StateFailed || got.Result != "" || r.Resolution != ledger.ResolutionFailed || r.ResolvedBy != "op" {
				t.Fatalf("task %s result %q, review %s by %s: the operator's decision must stand", got.State, got.Result, r.Resolution, r.ResolvedBy)
			}
		})
		t.Run("retried_and_claimed", func(t *testing.T) {
			b := setup(t, e)
			c := parkedUnknown(t, b, "lapsed-retried")
			if _, _, _, err := b.l.Act(ctx, c.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "op"}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.l.Claim(ctx, c.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: time.Minute}); err != nil {
				t.Fatal(err)
			}
			_, err := b.l.CompleteLapsed(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"r":1}`}, lapsedBy)
			var fe *ledger.FencedError
			if !errors.As(err, &fe) || fe.Why != "taken_over" {
				t.Fatalf("CompleteLapsed after a new claim: %v, want fenced taken_over", err)
			}
			if got, _ := b.l.Get(ctx, c.TaskID); got.State != ledger.StateRunning || got.Result != "" {
				t.Fatalf("the new attempt's task is %s with result %q", got.State, got.Result)
			}
		})
		t.Run("other_reason", func(t *testing.T) {
			b := setup(t, e)
			task := mustCreate(t, b, "lapsed-other-reason")
			c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.l.Park(ctx, c, ledger.ParkOptions{State: ledger.StateRunning, Version: c.AssignmentVersion},
				ledger.Review{Reason: ledger.ReviewResultTooLarge, Summary: "too large"}); err != nil {
				t.Fatal(err)
			}
			_, err = b.l.CompleteLapsed(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"r":1}`}, lapsedBy)
			var fe *ledger.FencedError
			if !errors.As(err, &fe) || fe.Why != "not_running" {
				t.Fatalf("CompleteLapsed on a result_too_large park: %v, want fenced not_running", err)
			}
			r, _ := b.l.GetReview(ctx, task.TaskID)
			if r.ReviewStatus != ledger.ReviewOpen {
				t.Fatalf("review %s: a refused lapsed save must change nothing", r.ReviewStatus)
			}
		})
		t.Run("no_resolution", func(t *testing.T) {
			b := setup(t, e)
			c := parkedUnknown(t, b, "lapsed-no-by")
			if _, err := b.l.CompleteLapsed(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"r":1}`}, ledger.LapsedResolution{Note: "x"}); err == nil {
				t.Fatal("CompleteLapsed without By: want an error")
			}
			if got, _ := b.l.Get(ctx, c.TaskID); got.State != ledger.StateNeedsReview {
				t.Fatalf("state %s after a refused call", got.State)
			}
		})
	})
}
