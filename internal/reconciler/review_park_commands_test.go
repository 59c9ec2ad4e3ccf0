package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The commands a review suggests decide the park they were read on: a
// task the reconciler parks, an operator retries and the reconciler parks
// again has a second review whose every command says --park 2, so one
// copied from the first review (--park 1) cannot decide the second park,
// whose reason its reader never saw.
func TestReparkedTaskReviewCommandsDecideTheSecondPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		task := create(t, b, "repark-commands")
		for park := 1; park <= 2; park++ {
			markCall(t, b, claim(t, b, task.TaskID)) // its call started, and its worker went silent
			b.clock.Advance(10 * time.Minute)        // past the lease and the call timeout: to unknown
			handle(t, b.handler())
			b.clock.Advance(time.Minute) // past Settle: parked, with no readback
			handle(t, b.handler())
			if got := get(t, b, task.TaskID); got.State != ledger.StateNeedsReview || got.ParkCount != park {
				t.Fatalf("park %d: the task is %s at park %d, want needs_review", park, got.State, got.ParkCount)
			}
			commandsAtThenRetry(t, b, task.TaskID, park)
		}
	})
}

// An approval that expires again after an operator's "ask again" (a
// retry, generated anew) is the task's second park: ExpireApproval's
// review commands say --park 2.
func TestApprovalExpiredAgainReviewCommandsDecideTheSecondPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "expires-twice", func(n *ledger.NewTask) {
			n.ApprovalTTL = time.Hour
			n.Plan = `{"approval":{"expires_in_seconds":3600,"required":true},"deliver":[]}`
		})
		for park := 1; park <= 2; park++ {
			c := claim(t, b, task.TaskID)
			if got, err := b.l.Complete(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"text":"r"}`, ApprovalTTL: c.ApprovalTTL()}); err != nil || got.State != ledger.StateAwaitingApproval {
				t.Fatalf("park %d: complete = %v, %v", park, got, err)
			}
			b.clock.Advance(time.Hour + time.Second)
			handle(t, b.handler())
			got := get(t, b, task.TaskID)
			if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewApprovalExpired || got.ParkCount != park {
				t.Fatalf("park %d: the task is %s (%s) at park %d, want needs_review (%s)", park, got.State, got.ReviewReason, got.ParkCount, ledger.ReviewApprovalExpired)
			}
			commandsAtThenRetry(t, b, task.TaskID, park)
		}
	})
}

// commandsAtThenRetry asserts that every command the review of task id
// suggests decides park, and after park 1 retries it as an operator would.
func commandsAtThenRetry(t *testing.T, b *bundle, id string, park int) {
	t.Helper()
	r, err := b.l.GetReview(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WantReviewCommandsAt(t, r, park)
	if park == 1 {
		if _, _, _, err := b.l.Act(ctx, id, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops@example.com", ParkCount: 1}); err != nil {
			t.Fatal(err)
		}
	}
}
