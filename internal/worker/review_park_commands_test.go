package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// parkedAndRetried parks task id once (park 1) and has an operator retry
// it: the task's next park is its second.
func parkedAndRetried(t *testing.T, b *bundle, id string) {
	t.Helper()
	ctx := context.Background()
	c, err := b.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "earlier-worker", Lease: time.Minute})
	if err == nil {
		_, err = b.l.Park(ctx, c, ledger.ParkOptions{State: c.State, Version: c.AssignmentVersion}, review.BudgetExhausted(c, review.BudgetAttempts))
	}
	if err == nil {
		testenv.WantReviewCommandsAt(t, mustReview(t, b, id), 1)
		_, _, _, err = b.l.Act(ctx, id, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops@example.com", ParkCount: 1})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A task the worker parks after an operator retried its first park has a
// second review whose commands decide park 2: one copied from the first
// review cannot decide this one, whose reason (the credentials) its
// reader never saw.
func TestWorkerParkAfterARetryCommandsDecideTheSecondPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := b.create(t, "credentials-second-park", prompt)
		parkedAndRetried(t, b, task.TaskID)
		b.sim.Script(task.TaskID, simulated.Credentials)
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, context.Background(), b.deliver(t, 1, 60)))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateNeedsReview)
		r := mustReview(t, b, task.TaskID)
		if r.Reason != ledger.ReviewProviderConfig {
			t.Fatalf("review %s, want %s", r.Reason, ledger.ReviewProviderConfig)
		}
		testenv.WantReviewCommandsAt(t, r, 2)
	})
}

// A lapsed result that cannot be saved revises the reconciler's
// unknown_outcome park rather than parking anew, so its commands decide
// the park revised (the task's second here): by ReviseLapsed (an
// oversized result), and by ReviseLapsedReview when every transaction
// is throttled.
func TestRevisedLapsedReviewCommandsDecideTheParkRevised(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, key string
		script    simulated.Fault
		decide    func(faultinject.Call) faultinject.Kind
		reason    string
		// taskToo: the task item is revised with the review (ReviseLapsed),
		// not the review item alone (ReviseLapsedReview).
		taskToo bool
	}{
		{"oversized", "lapsed-oversized-second-park", simulated.Oversized,
			func(faultinject.Call) faultinject.Kind { return "" }, ledger.ReviewResultTooLarge, true},
		{"throttled", "lapsed-throttled-second-park", "",
			func(c faultinject.Call) faultinject.Kind {
				if c.Key() == "DynamoDB.TransactWriteItems" {
					return faultinject.Throttle
				}
				return ""
			}, ledger.ReviewResultNotSaved, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				_, got, r := lapsedOutcomeRun(t, e, tc.key, func(b *bundle, id string) {
					parkedAndRetried(t, b, id)
					if tc.script != "" {
						b.sim.Script(id, tc.script)
					}
				}, tc.decide)
				if got.State != ledger.StateNeedsReview || r.ReviewStatus != ledger.ReviewOpen || r.Reason != tc.reason || tc.taskToo != (got.ReviewReason == tc.reason) {
					t.Fatalf("task %s/%s, review %s/%s; want the park revised to %s (the task item too: %v)", got.State, got.ReviewReason, r.ReviewStatus, r.Reason, tc.reason, tc.taskToo)
				}
				testenv.WantReviewCommandsAt(t, r, 2)
			})
		})
	}
}
