package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// An assignment given back once (Release: its attempt given back,
// claimed_ms removed) cannot be given back again at the same version from
// where the reconciler moved it since. The worker's Release whose reply
// was lost is repeated; meanwhile the age budget ended with an earlier
// attempt's outcome open, so the relay moved the task to unknown for a
// readback (AwaitReadback), perhaps on to an unknown_outcome park. The
// repeat is refused, and the worker settles from where the refusal found
// the task: ReleaseUnknown, ReleaseLapsed. Each would give the attempt
// back a second time — the earlier attempt's count erased, so the task
// gets one call more than its budget and its history two attempts of one
// number (DESIGN §1.5, §1.6) — and ReleaseLapsed would resolve a review
// of an outcome that is still open.
func TestAnAttemptGivenBackIsNotGivenBackAgainFromUnknownOrItsPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		for _, to := range []string{"unknown", "park"} {
			t.Run(to, func(t *testing.T) {
				b := setup(t, e)
				ctx := context.Background()
				const lease = 30 * time.Second
				task := mustCreate(t, b, "release-twice-"+to)
				// Attempt 1 lapses and is re-queued; attempt 2 gives itself
				// back before any call.
				c2 := secondClaimAfterARequeuedLapse(t, b, task.TaskID, lease)
				released, err := b.l.Release(ctx, task.TaskID, c2.AssignmentVersion, ledger.InAttempt(c2))
				if err != nil {
					t.Fatal(err)
				}
				if released.Attempts != 1 {
					t.Fatalf("setup: released with %d attempts, want 1", released.Attempts)
				}
				// The age budget ends while it waits: the relay moves it to
				// unknown for the readback of attempt 1's open outcome.
				b.clock.Set(time.UnixMilli(c2.DeadlineMs).Add(time.Second))
				since, open := released.OpenUncertainty()
				if ok, _ := released.BudgetLeft(b.clock.Now()); ok || !open {
					t.Fatalf("setup: budget left %v, outcome open %v; want the budget over with an outcome open", ok, open)
				}
				u, err := b.l.AwaitReadback(ctx, task.TaskID, c2.AssignmentVersion, since)
				if err != nil {
					t.Fatal(err)
				}
				var give func() (*ledger.Task, error)
				switch to {
				case "unknown":
					give = func() (*ledger.Task, error) {
						return b.l.ReleaseUnknown(ctx, task.TaskID, c2.AssignmentVersion, ledger.InAttempt(c2))
					}
				case "park":
					if _, err := b.l.Park(ctx, u, ledger.ParkOptions{State: ledger.StateUnknown, Version: u.AssignmentVersion},
						ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "attempt 1 may have acted; no readback"}); err != nil {
						t.Fatal(err)
					}
					res := ledger.LapsedResolution{By: "worker w2", Note: "attempt 2 made no provider call"}
					give = func() (*ledger.Task, error) {
						return b.l.ReleaseLapsed(ctx, task.TaskID, c2.AssignmentVersion, res, ledger.InAttempt(c2))
					}
				}
				before, err := b.l.Get(ctx, task.TaskID)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := give(); !isFenced(err) {
					t.Errorf("a second give-back of attempt 2 from %s = %v, want fenced", to, err)
				}
				got, err := b.l.Get(ctx, task.TaskID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Attempts != 1 || got.State != before.State {
					t.Errorf("after the second give-back: %s with %d attempts; want %s with attempt 1 still counted", got.State, got.Attempts, before.State)
				}
				if to == "park" {
					if r, err := b.l.GetReview(ctx, task.TaskID); err != nil || r.ReviewStatus != ledger.ReviewOpen {
						t.Errorf("the park's review: %+v, %v; want it open (attempt 1's outcome is not settled)", r, err)
					}
				}
			})
		}
	})
}
