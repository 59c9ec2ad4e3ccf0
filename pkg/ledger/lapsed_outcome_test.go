package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestFailLapsedFailsAndResolves: a lapsed attempt whose provider rejected
// the input fails the task and resolves its unknown_outcome review as
// failed by the worker, in one transaction.
func TestFailLapsedFailsAndResolves(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		c := parkedUnknown(t, b, "lapsed-fail")
		got, err := b.l.FailLapsed(ctx, c.TaskID, c.AssignmentVersion, "permanent_input", "HTTP 400", lapsedBy)
		if err != nil {
			t.Fatalf("FailLapsed: %v", err)
		}
		if got.State != ledger.StateFailed || got.ErrorClass != "permanent_input" || got.ErrorMessage != "HTTP 400" || got.ExpiresAt == 0 || got.StateShard != "" {
			t.Fatalf("task %s %s %q expires %d shard %q", got.State, got.ErrorClass, got.ErrorMessage, got.ExpiresAt, got.StateShard)
		}
		r, err := b.l.GetReview(ctx, c.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionFailed || r.ResolvedBy != lapsedBy.By || r.ResolutionNote != lapsedBy.Note {
			t.Fatalf("review %s/%s by %q note %q", r.ReviewStatus, r.Resolution, r.ResolvedBy, r.ResolutionNote)
		}
	})
}

// TestRetryLapsedSchedulesAndResolves: a lapsed attempt refused
// transiently (the provider did not act) goes to retry_wait until
// notBefore, indexed for dispatch, and its review is resolved as retry.
func TestRetryLapsedSchedulesAndResolves(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		c := parkedUnknown(t, b, "lapsed-retry")
		nb := b.clock.Now().Add(5 * time.Second)
		got, err := b.l.RetryLapsed(ctx, c.TaskID, c.AssignmentVersion, nb, "transient", "HTTP 429", lapsedBy)
		if err != nil {
			t.Fatalf("RetryLapsed: %v", err)
		}
		if got.State != ledger.StateRetryWait || got.NotBefore != nb.UnixMilli() || got.DueAt != nb.UnixMilli() || got.StateShard == "" ||
			got.ErrorClass != "transient" || got.LeaseOwner != "" {
			t.Fatalf("task %s not_before %d due %d shard %q class %q owner %q", got.State, got.NotBefore, got.DueAt, got.StateShard, got.ErrorClass, got.LeaseOwner)
		}
		r, _ := b.l.GetReview(ctx, c.TaskID)
		if r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionRetry || r.ResolvedBy != lapsedBy.By {
			t.Fatalf("review %s/%s by %q", r.ReviewStatus, r.Resolution, r.ResolvedBy)
		}
		// The next claim takes a new version: the lapsed worker stays fenced.
		b.clock.Advance(10 * time.Second)
		n, err := b.l.Claim(ctx, c.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: time.Minute})
		if err != nil || n.AssignmentVersion <= c.AssignmentVersion {
			t.Fatalf("claim after the lapsed retry: %v (version %v)", err, n)
		}
	})
}

// TestReviseLapsedRevisesTaskAndReview: a lapsed result that cannot be
// saved turns the park into result_too_large on the task and its open
// review item together; a repeat with the same nonce (a lost reply) is
// recognised, and a revised park is no longer unknown_outcome, so a second
// settlement is fenced.
func TestReviseLapsedRevisesTaskAndReview(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		c := parkedUnknown(t, b, "lapsed-revise")
		rev := ledger.Review{Reason: ledger.ReviewResultTooLarge, Summary: "too large, not saved", Known: []string{"the call succeeded"},
			Uncertain: []string{}, SafeActions: []string{"retry"}, ProviderRef: "ref-9", ErrorClass: "result_too_large", ErrorMessage: "not saved"}
		nonce := ledger.WithNonce(ledger.NewNonce())
		got, err := b.l.ReviseLapsed(ctx, c.TaskID, c.AssignmentVersion, rev, nonce)
		if err != nil {
			t.Fatalf("ReviseLapsed: %v", err)
		}
		if got.State != ledger.StateNeedsReview || got.ReviewReason != rev.Reason || got.ReviewSummary != rev.Summary ||
			got.ErrorClass != "result_too_large" || got.ProviderRef != "ref-9" || got.Result != "" {
			t.Fatalf("task %s/%s %q class %q ref %q", got.State, got.ReviewReason, got.ReviewSummary, got.ErrorClass, got.ProviderRef)
		}
		r, _ := b.l.GetReview(ctx, c.TaskID)
		if r.ReviewStatus != ledger.ReviewOpen || r.Reason != rev.Reason || r.Summary != rev.Summary || r.ProviderRef != "ref-9" ||
			len(r.Known) != 1 || r.Known[0] != "the call succeeded" || len(r.SafeActions) != 1 || r.ErrorMessage != "not saved" {
			t.Fatalf("review %+v", r)
		}
		if _, err := b.l.ReviseLapsed(ctx, c.TaskID, c.AssignmentVersion, rev, nonce); err != nil {
			t.Fatalf("repeat with the same nonce: %v, want recognised as applied", err)
		}
		_, err = b.l.CompleteLapsed(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"r":1}`}, lapsedBy)
		var fe *ledger.FencedError
		if !errors.As(err, &fe) || fe.Why != "not_running" {
			t.Fatalf("CompleteLapsed on a revised park: %v, want fenced not_running", err)
		}
		if _, err := b.l.ReviseLapsed(ctx, c.TaskID, c.AssignmentVersion, ledger.Review{Reason: "x"}); err == nil {
			t.Fatal("ReviseLapsed without a summary: want an error")
		}
	})
}

// TestReviseLapsedReviewRevisesTheOpenItemOfThatPark: the fallback revises
// the review item alone, only while it is the open unknown_outcome review
// of the park the caller read (park_count); a repeat is recognised.
func TestReviseLapsedReviewRevisesTheOpenItemOfThatPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		c := parkedUnknown(t, b, "lapsed-revise-item")
		parked, _ := b.l.Get(ctx, c.TaskID)
		rev := ledger.Review{Reason: ledger.ReviewResultNotSaved, Summary: "not saved", Known: []string{"ref-3"}, ProviderRef: "ref-3"}
		if err := b.l.ReviseLapsedReview(ctx, c.TaskID, parked.ParkCount+1, rev); !errors.As(err, new(*ledger.ConflictError)) {
			t.Fatalf("another park's count: %v, want *ConflictError", err)
		}
		if r, _ := b.l.GetReview(ctx, c.TaskID); r.Reason != ledger.ReviewUnknownOutcome {
			t.Fatalf("a refused revision changed the review to %s", r.Reason)
		}
		if err := b.l.ReviseLapsedReview(ctx, c.TaskID, parked.ParkCount, rev); err != nil {
			t.Fatalf("ReviseLapsedReview: %v", err)
		}
		if err := b.l.ReviseLapsedReview(ctx, c.TaskID, parked.ParkCount, rev); err != nil {
			t.Fatalf("repeat: %v, want recognised as applied", err)
		}
		r, _ := b.l.GetReview(ctx, c.TaskID)
		if r.ReviewStatus != ledger.ReviewOpen || r.Reason != rev.Reason || r.ProviderRef != "ref-3" || len(r.Known) != 1 || r.Uncertain == nil {
			t.Fatalf("review %+v", r)
		}
	})
}

// TestLapsedSettlementsAreFenced: after an operator resolved the park,
// FailLapsed and RetryLapsed change nothing.
func TestLapsedSettlementsAreFenced(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		c := parkedUnknown(t, b, "lapsed-fenced")
		if _, _, _, err := b.l.Act(ctx, c.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionCompleted, Note: "seen it", By: "op"}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.FailLapsed(ctx, c.TaskID, c.AssignmentVersion, "permanent_input", "HTTP 400", lapsedBy); !errors.As(err, new(*ledger.FencedError)) {
			t.Fatalf("FailLapsed: %v, want *FencedError", err)
		}
		if _, err := b.l.RetryLapsed(ctx, c.TaskID, c.AssignmentVersion, b.clock.Now(), "transient", "HTTP 429", lapsedBy); !errors.As(err, new(*ledger.FencedError)) {
			t.Fatalf("RetryLapsed: %v, want *FencedError", err)
		}
		got, _ := b.l.Get(ctx, c.TaskID)
		r, _ := b.l.GetReview(ctx, c.TaskID)
		if r.ResolvedBy != "op" || r.Resolution != ledger.ResolutionCompleted || got.State == ledger.StateFailed || got.State == ledger.StateRetryWait {
			t.Fatalf("task %s, review %s by %s: the operator's decision must stand", got.State, r.Resolution, r.ResolvedBy)
		}
	})
}
