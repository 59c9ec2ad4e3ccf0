package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestReplacementKeepsTheFencingToken: Create replaces an item past
// expires_at with a fresh task; it must carry the old item's
// assignment_version over, so the fencing token of a task id stays
// monotonic (DESIGN §4). Otherwise a worker still holding version 1
// of the old task — a lapsed worker whose task was parked and resolved by
// an operator while its call was still running — is accepted by the new
// task's fence once the new task's first claim reaches version 1, and
// saves the old prompt's result as the new task's. Retention is the
// shortest the ledger accepts (MinRetention).
func TestReplacementKeepsTheFencingToken(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, func(c *ledger.Config) { c.Retention = ledger.MinRetention })
		ctx := context.Background()
		old, err := b.l.Create(ctx, newTask("fence-ttl", "old prompt"))
		if err != nil {
			t.Fatal(err)
		}
		w1, err := b.l.Claim(ctx, old.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		// w1 lapses: unknown, parked, resolved as failed by an operator.
		b.clock.Advance(time.Minute)
		u, err := b.l.ExpireToUnknown(ctx, old.TaskID, w1.AssignmentVersion)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Park(ctx, u, ledger.ParkOptions{State: ledger.StateUnknown, Version: u.AssignmentVersion},
			ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "lapsed"}); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := b.l.Act(ctx, old.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionFailed, Note: "gave up", By: "op"}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(ledger.MinRetention + time.Minute)
		fresh, err := b.l.Create(ctx, newTask("fence-ttl", "new prompt"))
		if err != nil {
			t.Fatalf("re-create past TTL: %v", err)
		}
		w2, err := b.l.Claim(ctx, fresh.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if w2.AssignmentVersion <= w1.AssignmentVersion {
			t.Errorf("the new task's first claim has version %d, not above the old task's %d: the fencing token went backwards",
				w2.AssignmentVersion, w1.AssignmentVersion)
		}
		// w1's call returns: its fenced Complete at its own version.
		_, err = b.l.Complete(ctx, old.TaskID, w1.AssignmentVersion, ledger.Completion{Result: `{"for":"old prompt"}`})
		if !errors.As(err, new(*ledger.FencedError)) {
			got, _ := b.l.Get(ctx, old.TaskID)
			t.Fatalf("a worker of the replaced task completed the new task: err %v, state %s, result %q (input %s)",
				err, got.State, got.Result, got.Input)
		}
	})
}

// TestUnappliedWriteIsNotMistakenForOurs: the worker's previous
// write (a renewal) left its nonce on the item; the next write (Complete)
// fails before it is applied — a 503 or a throttle — and apply reads the
// item after the ambiguous error. The old nonce must not be taken for the
// new write's: Complete returns an error and the item has no result.
func TestUnappliedWriteIsNotMistakenForOurs(t *testing.T) {
	t.Parallel()
	for _, kind := range []faultinject.Kind{faultinject.SendFailure, faultinject.Throttle} {
		t.Run(string(kind), func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				ctx := context.Background()
				task := mustCreate(t, b, "unapplied-"+string(kind))
				c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := b.l.Renew(ctx, task.TaskID, c.AssignmentVersion, time.Minute); err != nil {
					t.Fatal(err)
				}
				inj := faultinject.New(faultinject.ScheduleFunc(func(call faultinject.Call) faultinject.Kind {
					if call.Key() == "DynamoDB.UpdateItem" && call.TaskID == task.TaskID {
						return kind
					}
					return ""
				}))
				cfg := b.env.AWS.Copy()
				cfg.APIOptions = append(cfg.APIOptions, inj.Register)
				fl, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
				if err != nil {
					t.Fatal(err)
				}
				got, err := fl.Complete(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"r":1}`})
				if err == nil || inj.Total(kind) != 1 {
					t.Fatalf("Complete = %+v, %v after an unapplied write (%d injected), want an error", got, err, inj.Total(kind))
				}
				if errors.As(err, new(*ledger.FencedError)) {
					t.Fatalf("an unapplied write reported as fenced: %v", err)
				}
				cur, err := b.l.Get(ctx, task.TaskID)
				if err != nil {
					t.Fatal(err)
				}
				if cur.State != ledger.StateRunning || cur.Result != "" {
					t.Fatalf("state %s result %q after an unapplied Complete", cur.State, cur.Result)
				}
				// The write is safe to repeat: the same Complete now saves once.
				if _, err := b.l.Complete(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"r":1}`}); err != nil {
					t.Fatalf("repeating the unapplied Complete: %v", err)
				}
			})
		})
	}
}
