package ledger_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Two operators decide the same open review at once: the second one's
// transaction, built from reads taken before the first one's landed, is
// refused, and Act answers from the review item as it then finds it. The
// same decision is a replay (the CLI's "a repeated action is a no-op"), and
// the task is returned as the first decision left it; another decision is
// a *ConflictError naming the resolution that stands, with the task, and
// changes nothing.
func TestActRacedByAnotherOperatorAnswersFromTheResolvedReview(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		second ledger.OperatorAction
		replay bool
	}{
		{name: "the same decision is a replay", second: ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops-b", Note: "give up"}, replay: true},
		{name: "another decision is a conflict", second: ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops-b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				ctx := context.Background()
				task := claimed(t, b, "operator-race")
				if _, err := b.l.Park(ctx, task, ledger.ParkOptions{State: ledger.StateRunning, Version: task.AssignmentVersion},
					ledger.Review{Reason: ledger.ReviewProviderConfig, Summary: "refused: credentials"}); err != nil {
					t.Fatal(err)
				}
				first := ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops-a", Note: "give up"}

				// The second operator's client: its transaction is sent
				// only after the first operator's decision has landed.
				var armed, raced atomic.Bool
				cfg := b.env.AWS.Copy()
				cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
					return s.Initialize.Add(middleware.InitializeMiddlewareFunc("anotherOperatorFirst",
						func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
							if awsmiddleware.GetOperationName(ctx) == "TransactWriteItems" && armed.CompareAndSwap(true, false) {
								if _, _, _, err := b.l.Act(context.Background(), task.TaskID, first); err != nil {
									return middleware.InitializeOutput{}, middleware.Metadata{}, errors.Join(errors.New("the first operator's decision was not applied"), err)
								}
								raced.Store(true)
							}
							return next.HandleInitialize(ctx, in)
						}), middleware.After)
				})
				second, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
				if err != nil {
					t.Fatal(err)
				}
				armed.Store(true)
				r, got, replayed, err := second.Act(ctx, task.TaskID, c.second)
				if !raced.Load() {
					t.Fatal("the first operator's decision was not injected")
				}
				if c.replay {
					if err != nil || !replayed || r == nil || r.Resolution != ledger.ResolutionFailed || got == nil || got.State != ledger.StateFailed {
						t.Fatalf("Act of the decision that landed first = review %+v, task %+v, replayed %v, %v; want a replay with the failed task", r, got, replayed, err)
					}
					return
				}
				var ce *ledger.ConflictError
				if !errors.As(err, &ce) || ce.Task == nil || ce.Task.State != ledger.StateFailed || replayed || r != nil || got != nil {
					t.Fatalf("Act of another decision after the first landed = review %+v, task %+v, replayed %v, %v; want a *ConflictError with the failed task", r, got, replayed, err)
				}
				cur, err := b.l.GetReview(ctx, task.TaskID)
				if err != nil {
					t.Fatal(err)
				}
				if cur.Resolution != ledger.ResolutionFailed || cur.ResolvedBy != "ops-a" {
					t.Fatalf("review after the refused decision: resolution %q by %q; want failed by ops-a", cur.Resolution, cur.ResolvedBy)
				}
			})
		})
	}
}
