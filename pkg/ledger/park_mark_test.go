package ledger_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// suggesting is a review whose safe actions suggest operator commands with
// the park left to the ledger (ledger.ParkMark), as package review words them.
func suggesting(id, reason string) ledger.Review {
	return ledger.Review{Reason: reason, Summary: "s", Known: []string{"k"}, Uncertain: []string{"u"}, SafeActions: []string{
		"retry: `taskledger review retry " + id + " --park " + ledger.ParkMark + "` re-queues it",
		"resolve as failed: `taskledger review resolve " + id + " --outcome failed --note \"<reason>\" --park " + ledger.ParkMark + "` ends it",
	}}
}

// TestParkWritesItsNumberIntoTheSuggestedCommands: each command a review
// suggests decides the park the item records, a number only the write of
// the item knows for certain. Park writes the task's park_count plus one —
// 1, then 2 after an operator's retry — without changing the caller's
// review (which the worker may write again, revised, at the park it finds).
func TestParkWritesItsNumberIntoTheSuggestedCommands(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "park-mark")
		for park := 1; park <= 2; park++ {
			c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
			if err != nil {
				t.Fatalf("park %d: claim: %v", park, err)
			}
			rv := suggesting(task.TaskID, ledger.ReviewProviderConfig)
			before := slices.Clone(rv.SafeActions)
			if _, err := b.l.Park(ctx, c, ledger.ParkOptions{State: ledger.StateRunning, Version: c.AssignmentVersion}, rv); err != nil {
				t.Fatalf("park %d: %v", park, err)
			}
			if !slices.Equal(rv.SafeActions, before) {
				t.Fatalf("park %d: Park changed the caller's safe actions to %q", park, rv.SafeActions)
			}
			r, err := b.l.GetReview(ctx, task.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			testenv.WantReviewCommandsAt(t, r, park)
			if _, _, _, err := b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "op", ParkCount: park}); err != nil {
				t.Fatalf("park %d: operator retry: %v", park, err)
			}
		}
	})
}

// TestRevisionsWriteTheParkTheyReviseIntoTheSuggestedCommands: a lapsed
// result's revision of an unknown_outcome park keeps the park (the item's
// park_count is not rewritten), so its commands must name that park:
// ReviseLapsed the ParkCount its caller read on the task, refused without
// one; ReviseLapsedReview the park it is conditioned on.
func TestRevisionsWriteTheParkTheyReviseIntoTheSuggestedCommands(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()

		// ReviseLapsed of a second park: parked, retried by an operator, and
		// parked unknown_outcome at the next claim.
		first := parkedUnknown(t, b, "revise-mark")
		if _, _, _, err := b.l.Act(ctx, first.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "op", ParkCount: 1}); err != nil {
			t.Fatal(err)
		}
		c, err := b.l.Claim(ctx, first.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
		u, err := b.l.ExpireToUnknown(ctx, c.TaskID, c.AssignmentVersion)
		if err == nil {
			u, err = b.l.Park(ctx, u, ledger.ParkOptions{State: ledger.StateUnknown, Version: u.AssignmentVersion}, suggesting(c.TaskID, ledger.ReviewUnknownOutcome))
		}
		if err != nil {
			t.Fatal(err)
		}
		rev := suggesting(c.TaskID, ledger.ReviewResultTooLarge)
		if _, err := b.l.ReviseLapsed(ctx, c.TaskID, c.AssignmentVersion, rev); err == nil {
			t.Fatal("ReviseLapsed of commands without the park they decide: want an error")
		}
		if r, _ := b.l.GetReview(ctx, c.TaskID); r.Reason != ledger.ReviewUnknownOutcome {
			t.Fatalf("a refused revision changed the review to %s", r.Reason)
		}
		rev.ParkCount = u.ParkCount
		if _, err := b.l.ReviseLapsed(ctx, c.TaskID, c.AssignmentVersion, rev); err != nil {
			t.Fatalf("ReviseLapsed: %v", err)
		}
		r, err := b.l.GetReview(ctx, c.TaskID)
		if err != nil || r.Reason != ledger.ReviewResultTooLarge {
			t.Fatalf("review %+v, %v; want it revised", r, err)
		}
		testenv.WantReviewCommandsAt(t, r, 2)

		// ReviseLapsedReview of a first park.
		p := parkedUnknown(t, b, "revise-item-mark")
		if err := b.l.ReviseLapsedReview(ctx, p.TaskID, 1, suggesting(p.TaskID, ledger.ReviewResultNotSaved)); err != nil {
			t.Fatalf("ReviseLapsedReview: %v", err)
		}
		if r, err = b.l.GetReview(ctx, p.TaskID); err != nil || r.Reason != ledger.ReviewResultNotSaved {
			t.Fatalf("review %+v, %v; want it revised", r, err)
		}
		testenv.WantReviewCommandsAt(t, r, 1)
	})
}

// TestPoisonItemCommandsDecideItsOnlyPark: a poison item is parked once
// (park_count 1), and its suggested resolve says so, in the item and in
// what PutPoison returns.
func TestPoisonItemCommandsDecideItsOnlyPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		rv := suggesting(ledger.PoisonID("m-park"), ledger.ReviewPoisonMessage)
		rv.MessageID, rv.SafeActions = "m-park", rv.SafeActions[1:]
		put, err := b.l.PutPoison(ctx, rv)
		if err != nil {
			t.Fatal(err)
		}
		testenv.WantReviewCommandsAt(t, put, 1)
		r, err := b.l.GetReview(ctx, ledger.PoisonID("m-park"))
		if err != nil {
			t.Fatal(err)
		}
		testenv.WantReviewCommandsAt(t, r, 1)
	})
}
