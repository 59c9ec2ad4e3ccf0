package ledger_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestParkReturnsTheItemWithoutARead: Park writes in one transaction and
// returns the task as its update left it — the same item a consistent read
// returns — and counts parks on the task item, so the review's park_count
// needs no read of the previous review either: a park, an operator retry
// and a second park give counts 1 and 2, and the park itself makes no
// GetItem.
func TestParkReturnsTheItemWithoutARead(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "park-twice")
		for round := 1; round <= 2; round++ {
			c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
			if err != nil {
				t.Fatalf("round %d: claim: %v", round, err)
			}
			e.Counter.Reset()
			got, err := b.l.Park(ctx, c, ledger.ParkOptions{State: ledger.StateRunning, Version: c.AssignmentVersion},
				ledger.Review{Reason: ledger.ReviewProviderConfig, Summary: "s", ErrorClass: "permanent_config", ErrorMessage: "bad key"})
			if err != nil {
				t.Fatalf("round %d: park: %v", round, err)
			}
			if n := e.Counter.Calls()["DynamoDB.GetItem"]; n != 0 {
				t.Fatalf("round %d: the park made %d GetItem calls, want none", round, n)
			}
			read, err := b.l.Get(ctx, task.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, read) {
				t.Fatalf("round %d: Park returned\n%+v\nthe item is\n%+v", round, got, read)
			}
			r, err := b.l.GetReview(ctx, task.TaskID)
			if err != nil || r.ParkCount != round || read.ParkCount != round {
				t.Fatalf("round %d: review park_count %v / task %d (%v), want %d", round, r, read.ParkCount, err, round)
			}
			if round == 1 {
				if _, _, _, err := b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "op"}); err != nil {
					t.Fatalf("operator retry: %v", err)
				}
			}
		}
	})
}
