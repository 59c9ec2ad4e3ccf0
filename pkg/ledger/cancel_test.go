package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCancelRunning: a cancel while running bumps the fencing token, so the
// running assignment can neither renew nor save; the task waits in unknown
// (cancel_version = the fenced version) until the fenced lease would end;
// CancelUnknown then ends it cancelled. A repeat, a stale version or a
// task in another state is refused.
func TestCancelRunning(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "cancel-running")
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(5 * time.Second)
		got, err := b.l.CancelRunning(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != ledger.StateUnknown || got.AssignmentVersion != c.AssignmentVersion+1 || got.CancelVersion != c.AssignmentVersion ||
			got.ErrorClass != ledger.ErrorCancelRequested || got.DueAt != c.LeaseUntil || got.LeaseOwner != "" || got.Attempts != c.Attempts {
			t.Fatalf("after CancelRunning: %+v; want unknown, version %d, cancel_version %d, cancel_requested, due at the fenced lease end %d",
				got, c.AssignmentVersion+1, c.AssignmentVersion, c.LeaseUntil)
		}
		var fe *ledger.FencedError
		if _, err := b.l.Renew(ctx, task.TaskID, c.AssignmentVersion, 30*time.Second); !errors.As(err, &fe) {
			t.Fatalf("the cancelled holder's renewal = %v, want *FencedError", err)
		}
		if _, err := b.l.Complete(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"text":"late"}`}); !errors.As(err, &fe) {
			t.Fatalf("the cancelled holder's completion = %v, want *FencedError", err)
		}
		var ce *ledger.ConflictError
		if _, err := b.l.CancelRunning(ctx, c); !errors.As(err, &ce) || ce.State != ledger.StateUnknown {
			t.Fatalf("a second CancelRunning at the old version = %v, want *ConflictError (unknown)", err)
		}
		if _, err := b.l.CancelUnknown(ctx, task.TaskID, c.AssignmentVersion, "x"); !errors.As(err, &fe) {
			t.Fatalf("CancelUnknown at the fenced version = %v, want *FencedError", err)
		}
		done, err := b.l.CancelUnknown(ctx, task.TaskID, got.AssignmentVersion, "no provider call had started")
		if err != nil {
			t.Fatal(err)
		}
		if done.State != ledger.StateCancelled || done.Result != "" || done.ErrorClass != ledger.ErrorCancelledWhileRunning || done.StateShard != "" || done.ExpiresAt == 0 {
			t.Fatalf("after CancelUnknown: %+v; want cancelled, no result, out of the index, with a TTL", done)
		}

		// An unknown task that was not cancelled cannot be ended by CancelUnknown.
		other := mustCreate(t, b, "cancel-unknown-plain")
		oc, err := b.l.Claim(ctx, other.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.MarkUnknown(ctx, other.TaskID, oc.AssignmentVersion, "unknown_outcome", "lost reply"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.CancelUnknown(ctx, other.TaskID, oc.AssignmentVersion, "x"); !errors.As(err, &fe) {
			t.Fatalf("CancelUnknown of an unknown task nobody cancelled = %v, want *FencedError", err)
		}
	})
}

// TestCancelRacingCompletion: a cancel and the worker's completion race at
// the same version; exactly one wins and the task is consistent with it.
func TestCancelRacingCompletion(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		wins := map[string]int{}
		for i := range 8 {
			task := mustCreate(t, b, "cancel-race-"+string(rune('a'+i)))
			c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var cerr, kerr error
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, cerr = b.l.Complete(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"text":"done"}`})
			}()
			go func() { defer wg.Done(); _, kerr = b.l.CancelRunning(ctx, c) }()
			wg.Wait()
			got, err := b.l.Get(ctx, task.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			var fe *ledger.FencedError
			var ce *ledger.ConflictError
			switch {
			case cerr == nil && errors.As(kerr, &ce) && ce.State == ledger.StateCompleted:
				wins["complete"]++
				if got.State != ledger.StateCompleted || got.Result == "" || got.CancelVersion != 0 {
					t.Fatalf("completion won but the task is %+v", got)
				}
			case kerr == nil && errors.As(cerr, &fe):
				wins["cancel"]++
				if got.State != ledger.StateUnknown || got.Result != "" || got.CancelVersion != c.AssignmentVersion {
					t.Fatalf("cancel won but the task is %+v", got)
				}
			default:
				t.Fatalf("complete = %v, cancel = %v: want exactly one to win (task %s, result %q)", cerr, kerr, got.State, got.Result)
			}
		}
		t.Logf("winners over 8 races: %v", wins)
	})
}
