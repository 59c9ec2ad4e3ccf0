package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// ReleaseUnknown gives back an assignment whose lease the reconciler
// expired to unknown before its worker made the provider call: queued,
// the attempt given back, the error no longer unknown_outcome. Only from
// unknown at the caller's version — never from running (Release's), nor
// for another assignment, nor twice — and a lost reply (in the SDK's
// retry loop, or after it) is recognised as the caller's own write.
func TestReleaseUnknownGivesBackAnUncalledAssignment(t *testing.T) {
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
