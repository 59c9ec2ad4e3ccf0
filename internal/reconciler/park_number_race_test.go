package reconciler_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A queued task past its age budget is read by the reconciler; before its
// park is sent, another actor (a second reconciler run, or a worker whose
// claim was refused for the budget) parks it, and an operator retries that
// park with the command its review suggested (--park 1). The retry leaves
// the task queued at the same assignment version, so the reconciler's park
// still applies: it is the task's second park. Its review's commands must
// say --park 2, and the resolve copied from the first review (--park 1),
// whose reader never saw this park, must be refused. Park numbers it from
// the task as the reconciler read it (park_count 0, plus one), which no
// condition holds: the second park is numbered 1 again, so park 1's copied
// command decides it.
func TestParkAfterARacingParkAndRetryIsNumberedTheSecondPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "park-number-race", func(n *ledger.NewTask) { n.MaxAge = 5 * time.Minute })
		id := task.TaskID
		var hookErr error
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Key() != "DynamoDB.TransactWriteItems" || c.TaskID != id || c.N != 1 {
				return ""
			}
			// The reconciler has read the task and decided to park it: the
			// other actor's park and the operator's retry land first.
			hookErr = func() error {
				cur, err := b.l.Get(ctx, id)
				if err != nil {
					return err
				}
				first := ledger.Review{Reason: ledger.ReviewBudgetExhausted, Summary: "past its age budget", SafeActions: []string{
					"retry: `taskledger review retry " + id + " --park " + ledger.ParkMark + "` re-queues it",
					"resolve as failed: `taskledger review resolve " + id + " --outcome failed --note \"<reason>\" --park " + ledger.ParkMark + "` ends it",
				}}
				if _, err := b.l.Park(ctx, cur, ledger.ParkOptions{State: cur.State, Version: cur.AssignmentVersion}, first); err != nil {
					return fmt.Errorf("the other actor's park: %w", err)
				}
				if r, err := b.l.GetReview(ctx, id); err != nil || r.ParkCount != 1 {
					return fmt.Errorf("the first park: %+v, %v", r, err)
				}
				if _, _, _, err := b.l.Act(ctx, id, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops@example.com", ParkCount: 1}); err != nil {
					return fmt.Errorf("the operator's retry of park 1: %w", err)
				}
				return nil
			}()
			return ""
		}))
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		raced, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		h := b.handler()
		h.Ledger = raced
		b.clock.Advance(6 * time.Minute)
		s := handle(t, h)
		if hookErr != nil {
			t.Fatalf("setup: %v", hookErr)
		}
		got := get(t, b, id)
		r, err := b.l.GetReview(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if s.Parked != 1 || got.State != ledger.StateNeedsReview || r.ReviewStatus != ledger.ReviewOpen {
			// Refused (held to the park it read): no second park to number.
			t.Logf("the reconciler's park did not apply after the retry (summary %+v, task %s, review %s)", s, got.State, r.ReviewStatus)
			return
		}
		if got.ParkCount != 2 {
			t.Errorf("the task's second park is recorded as park_count %d, want 2", got.ParkCount)
		}
		testenv.WantReviewCommandsAt(t, r, 2)
		// The resolve copied from the first review, whose reason its reader
		// saw, run now: it must not decide this park.
		_, _, replayed, err := b.l.Act(ctx, id, ledger.OperatorAction{Resolution: ledger.ResolutionFailed, Note: "copied from park 1's review", By: "ops@example.com", ParkCount: 1})
		var ce *ledger.ConflictError
		if !errors.As(err, &ce) {
			after := get(t, b, id)
			t.Fatalf("park 1's copied resolve on the second park: replayed=%v err=%v, task now %s; want a *ConflictError, nothing changed", replayed, err, after.State)
		}
	})
}
