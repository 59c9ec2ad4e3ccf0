package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// ReleaseUnknown gives back an assignment whose lease the reconciler
// expired to unknown before its worker made the provider call: queued,
// the attempt given back, the error no longer unknown_outcome. Only from
// unknown at the caller's version — never from running (Release's), nor
// for another assignment, nor twice — and a lost reply (in the SDK's
// retry loop, or after it) is recognised as the caller's own write.
func TestReleaseUnknownGivesBackAnUncalledAssignment(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := mustCreate(t, b, "release-unknown-"+mode)
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.MarkCallStarted(ctx, task.TaskID, c.AssignmentVersion, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.ReleaseUnknown(ctx, task.TaskID, c.AssignmentVersion); !isFenced(err) {
			t.Fatalf("ReleaseUnknown of a running task = %v, want fenced (Release is the running task's)", err)
		}
		b.clock.Advance(31 * time.Second)
		if _, err := b.l.ExpireToUnknown(ctx, task.TaskID, c.AssignmentVersion); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.ReleaseUnknown(ctx, task.TaskID, c.AssignmentVersion+1); !isFenced(err) {
			t.Fatalf("ReleaseUnknown at another version = %v, want fenced", err)
		}
		l, arm, lost := lossy(t, b, mode, "UpdateItem")
		arm()
		r, err := l.ReleaseUnknown(ctx, task.TaskID, c.AssignmentVersion)
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("ReleaseUnknown after a lost reply = %v; want its own write recognised", err)
		}
		stored, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []*ledger.Task{r, stored} {
			if got.State != ledger.StateQueued || got.Attempts != 0 || got.AssignmentVersion != c.AssignmentVersion ||
				got.ErrorClass != ledger.ErrorCallNotStarted || got.ErrorMessage != ledger.CallNotStartedMessage || got.LeaseOwner != "" {
				t.Fatalf("released from unknown: state %s attempts %d version %d error %q %q owner %q; want queued, 0, %d, %s",
					got.State, got.Attempts, got.AssignmentVersion, got.ErrorClass, got.ErrorMessage, got.LeaseOwner, c.AssignmentVersion, ledger.ErrorCallNotStarted)
			}
		}
		if _, err := b.l.ReleaseUnknown(ctx, task.TaskID, c.AssignmentVersion); !isFenced(err) {
			t.Fatalf("released twice: %v", err)
		}
		again, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if again.Attempts != 1 || again.AssignmentVersion != c.AssignmentVersion+1 {
			t.Fatalf("reclaimed: attempts %d version %d; want 1 and %d", again.Attempts, again.AssignmentVersion, c.AssignmentVersion+1)
		}
	})
}

// ReleaseLapsed resolves the unknown_outcome park of an assignment under
// which no call was made: queued, the attempt given back, the review
// resolved as retry — in one transaction, recognised after a lost reply,
// never for another version, never twice.
func TestReleaseLapsedResolvesTheParkAndGivesTheAttemptBack(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := mustCreate(t, b, "release-lapsed-"+mode)
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(31 * time.Second)
		u, err := b.l.ExpireToUnknown(ctx, task.TaskID, c.AssignmentVersion)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Park(ctx, u, ledger.ParkOptions{State: ledger.StateUnknown, Version: c.AssignmentVersion},
			ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "may have acted"}); err != nil {
			t.Fatal(err)
		}
		res := ledger.LapsedResolution{By: "worker w1", Note: "no call was made"}
		if _, err := b.l.ReleaseLapsed(ctx, task.TaskID, c.AssignmentVersion+1, res); !isFenced(err) {
			t.Fatalf("ReleaseLapsed at another version = %v, want fenced", err)
		}
		l, arm, lost := lossy(t, b, mode, "TransactWriteItems")
		arm()
		got, err := l.ReleaseLapsed(ctx, task.TaskID, c.AssignmentVersion, res)
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("ReleaseLapsed after a lost reply = %v; want its own write recognised", err)
		}
		if got.State != ledger.StateQueued || got.Attempts != 0 || got.ErrorClass != ledger.ErrorCallNotStarted {
			t.Fatalf("released from the park: %s, %d attempts, error %q; want queued, 0, %s", got.State, got.Attempts, got.ErrorClass, ledger.ErrorCallNotStarted)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil || r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionRetry || r.ResolutionNote != res.Note {
			t.Fatalf("review after ReleaseLapsed: %+v, %v; want resolved as retry with the note", r, err)
		}
		if _, err := b.l.ReleaseLapsed(ctx, task.TaskID, c.AssignmentVersion, res); !isFenced(err) {
			t.Fatalf("released twice: %v", err)
		}
	})
}

// ScheduleRetry and Fail are accepted from unknown at the caller's version
// after a refusal (AfterRefusal: the worker whose lease the reconciler
// expired knows its call was refused), never without it (a 5xx may hide a
// generation: the reconciler's to read back), never at another version.
func TestRetryAndFailFromUnknownAtMine(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		for _, name := range []string{"retry", "fail"} {
			task := mustCreate(t, b, "from-unknown-"+name)
			c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			b.clock.Advance(31 * time.Second)
			if _, err := b.l.ExpireToUnknown(ctx, task.TaskID, c.AssignmentVersion); err != nil {
				t.Fatal(err)
			}
			do := func(v int64, o ...ledger.WriteOption) (*ledger.Task, error) {
				if name == "retry" {
					return b.l.ScheduleRetry(ctx, task.TaskID, v, b.clock.Now().Add(time.Minute), "transient", "429", o...)
				}
				return b.l.Fail(ctx, task.TaskID, v, "permanent_input", "400", o...)
			}
			if _, err := do(c.AssignmentVersion); !isFenced(err) {
				t.Fatalf("%s from unknown without AfterRefusal = %v, want fenced", name, err)
			}
			if _, err := do(c.AssignmentVersion+1, ledger.AfterRefusal()); !isFenced(err) {
				t.Fatalf("%s from unknown at another version = %v, want fenced", name, err)
			}
			got, err := do(c.AssignmentVersion, ledger.AfterRefusal())
			if err != nil {
				t.Fatalf("%s from unknown at mine: %v", name, err)
			}
			want := ledger.StateRetryWait
			if name == "fail" {
				want = ledger.StateFailed
			}
			if got.State != want || got.ErrorClass == "unknown_outcome" {
				t.Fatalf("%s from unknown: %s, error %q; want %s and the refusal's error", name, got.State, got.ErrorClass, want)
			}
		}
	})
}

// CancelLapsed ends cancelled the unknown_outcome park of a cancel while
// running (at the cancel's version, cancel_version set), resolving its
// review as cancelled — recognised after a lost reply, never twice, never
// for a park that no cancel made.
func TestCancelLapsedEndsACancelledPark(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		res := ledger.LapsedResolution{By: "worker w1", Note: "no call was made"}
		park := func(key string, cancel bool) (*ledger.Task, int64) {
			task := mustCreate(t, b, key+"-"+mode)
			c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			var u *ledger.Task
			if cancel {
				u, err = b.l.CancelRunning(ctx, c)
			} else {
				b.clock.Advance(31 * time.Second)
				u, err = b.l.ExpireToUnknown(ctx, task.TaskID, c.AssignmentVersion)
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.l.Park(ctx, u, ledger.ParkOptions{State: ledger.StateUnknown, Version: u.AssignmentVersion},
				ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "may have acted"}); err != nil {
				t.Fatal(err)
			}
			return u, u.AssignmentVersion
		}
		plain, pv := park("cancel-lapsed-nocancel", false)
		if _, err := b.l.CancelLapsed(ctx, plain.TaskID, pv, "why", res); !isFenced(err) {
			t.Fatalf("CancelLapsed of a park no cancel made = %v, want fenced", err)
		}
		task, v := park("cancel-lapsed", true)
		l, arm, lost := lossy(t, b, mode, "TransactWriteItems")
		arm()
		got, err := l.CancelLapsed(ctx, task.TaskID, v, "cancelled before the call; no call was made", res)
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("CancelLapsed after a lost reply = %v; want its own write recognised", err)
		}
		if got.State != ledger.StateCancelled || got.ErrorClass != ledger.ErrorCancelledWhileRunning {
			t.Fatalf("after CancelLapsed: %s, error %q; want cancelled, %s", got.State, got.ErrorClass, ledger.ErrorCancelledWhileRunning)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil || r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionCancelled {
			t.Fatalf("review after CancelLapsed: %+v, %v; want resolved cancelled", r, err)
		}
		if _, err := b.l.CancelLapsed(ctx, task.TaskID, v, "again", res); !isFenced(err) {
			t.Fatalf("CancelLapsed twice = %v, want fenced", err)
		}
	})
}
