package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A review item tells the operator which actions are safe next (DESIGN
// §1.6), and the ledger refuses "completed" on a task with an approval gate
// (it completes only through an approval). A gated task whose outcome is
// unknown and cannot be read back is parked unknown_outcome; what its review
// offers must be what the operator may do: a safe action the ledger then
// refuses as invalid sends the operator to a dead end with the review still
// saying it is the right move.
func TestGatedUnknownOutcomeReviewOffersNoResolutionTheLedgerRefuses(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoReadback: true})
		task := unknownTask(t, b, "gated-unknown", true, func(n *ledger.NewTask) {
			n.ApprovalTTL = 3 * time.Hour
			n.Plan = `{"approval":{"expires_in_seconds":10800,"required":true},"deliver":[]}`
		})
		b.clock.Advance(time.Minute)
		if s := handle(t, b.handler()); s.Parked != 1 {
			t.Fatalf("summary = %+v, want the gated task parked", s)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		offers := strings.Contains(r.Summary, "resolve as completed")
		for _, a := range r.SafeActions {
			offers = offers || strings.Contains(a, "--outcome completed")
		}
		if !offers {
			return // the review offers no completion: nothing to refuse
		}
		_, _, _, err = b.l.Act(context.Background(), task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionCompleted, By: "ops@example.com", Note: "provider console shows it succeeded"})
		if errors.Is(err, ledger.ErrInvalidAction) {
			t.Fatalf("the review of gated task %s offers resolving it as completed (summary %q, safe actions %q), and the ledger refuses exactly that: %v", task.TaskID, r.Summary, r.SafeActions, err)
		}
	})
}
