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

// faulty returns a ledger sharing b's tables and clock whose calls are
// faulted by decide (b.l stays clean).
func faulty(t *testing.T, b *bundle, decide func(c faultinject.Call) faultinject.Kind) (*ledger.Ledger, *faultinject.Injector) {
	t.Helper()
	inj := faultinject.New(faultinject.ScheduleFunc(decide))
	cfg := b.env.AWS.Copy()
	cfg.APIOptions = append(cfg.APIOptions, inj.Register)
	l, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
	if err != nil {
		t.Fatal(err)
	}
	return l, inj
}

// TestRepeatedWriteWithItsNonceRecognisesALateApply: a Complete is applied
// but its reply is lost and every read that would recognise it is
// throttled, so the caller gets an error. Repeating the write with the same
// nonce (WithNonce) returns the task as that first send wrote it; a write
// with another nonce is fenced (already_completed).
func TestRepeatedWriteWithItsNonceRecognisesALateApply(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "nonce-repeat")
		claimed, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "me", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		l, inj := faulty(t, b, func(c faultinject.Call) faultinject.Kind {
			switch c.Key() {
			case "DynamoDB.UpdateItem":
				if c.N == 1 {
					return faultinject.LostReply
				}
			case "DynamoDB.GetItem":
				return faultinject.Throttle
			}
			return ""
		})
		c := ledger.Completion{Result: `{"text":"once"}`, Provider: "sim", ProviderRef: "ref-1"}
		nonce := ledger.NewNonce()
		if _, err := l.Complete(ctx, task.TaskID, claimed.AssignmentVersion, c, ledger.WithNonce(nonce)); err == nil {
			t.Fatal("Complete with a lost reply and no confirming read returned no error")
		} else if errors.As(err, new(*ledger.FencedError)) {
			t.Fatalf("Complete with a lost reply = %v; want an unresolved error, not a fence", err)
		}
		if inj.Total(faultinject.LostReply) != 1 || inj.Total(faultinject.Throttle) == 0 {
			t.Fatalf("faults injected: %+v", inj.Injected())
		}
		if got := mustGet(t, b, task.TaskID); got.State != ledger.StateCompleted || got.Result != c.Result {
			t.Fatalf("setup: the first send was not applied: state %s", got.State)
		}
		got, err := b.l.Complete(ctx, task.TaskID, claimed.AssignmentVersion, c, ledger.WithNonce(nonce))
		if err != nil || got.State != ledger.StateCompleted || got.Result != c.Result {
			t.Fatalf("repeat with the same nonce = %v, %v; want the completed task", got, err)
		}
		var fe *ledger.FencedError
		if _, err := b.l.Complete(ctx, task.TaskID, claimed.AssignmentVersion, c); !errors.As(err, &fe) || fe.Why != "already_completed" {
			t.Fatalf("a write with a fresh nonce = %v; want fenced already_completed", err)
		}
	})
}

// TestOwnWriteRereadsAfterAFailedRead: the claim's reply is lost and the
// first read that would recognise it is throttled; the ledger reads again
// and returns the claim as taken.
func TestOwnWriteRereadsAfterAFailedRead(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "own-write-reread")
		l, inj := faulty(t, b, func(c faultinject.Call) faultinject.Kind {
			switch {
			case c.Key() == "DynamoDB.UpdateItem" && c.N == 1:
				return faultinject.LostReply
			case c.Key() == "DynamoDB.GetItem" && c.N == 1:
				return faultinject.Throttle
			}
			return ""
		})
		got, err := l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "me", Lease: time.Minute})
		if inj.Total(faultinject.LostReply) != 1 || inj.Total(faultinject.Throttle) != 1 {
			t.Fatalf("faults injected: %+v", inj.Injected())
		}
		if err != nil || got.State != ledger.StateRunning || got.LeaseOwner != "me" || got.AssignmentVersion != 1 {
			t.Fatalf("Claim = %+v, %v; want the claim recognised on the second read", got, err)
		}
	})
}

// TestReleaseClaimIsConditionedOnTheOwner: only a running task leased to
// the given owner (and at the given version, when one is given) is
// released; the release queues it and gives the attempt back, and the
// fencing token stays incremented.
func TestReleaseClaimIsConditionedOnTheOwner(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "release-claim")
		if _, ok, err := b.l.ReleaseClaim(ctx, task.TaskID, "me", 0); ok || err != nil {
			t.Fatalf("ReleaseClaim of a queued task = %v, %v; want not released", ok, err)
		}
		if _, _, err := b.l.ReleaseClaim(ctx, task.TaskID, "", 0); err == nil {
			t.Fatal("ReleaseClaim without an owner: no error")
		}
		claimed, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "me", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			owner   string
			version int64
		}{{"other", 0}, {"me", claimed.AssignmentVersion + 1}} {
			if _, ok, err := b.l.ReleaseClaim(ctx, task.TaskID, c.owner, c.version); ok || err != nil {
				t.Fatalf("ReleaseClaim(%q, %d) = %v, %v; want not released", c.owner, c.version, ok, err)
			}
			if got := mustGet(t, b, task.TaskID); got.State != ledger.StateRunning || got.LeaseOwner != "me" || got.Attempts != 1 {
				t.Fatalf("a refused ReleaseClaim changed the task: state %s owner %q attempts %d", got.State, got.LeaseOwner, got.Attempts)
			}
		}
		got, ok, err := b.l.ReleaseClaim(ctx, task.TaskID, "me", 0)
		if err != nil || !ok {
			t.Fatalf("ReleaseClaim by the owner = %v, %v", ok, err)
		}
		if got.State != ledger.StateQueued || got.Attempts != 0 || got.LeaseOwner != "" || got.AssignmentVersion != claimed.AssignmentVersion {
			t.Fatalf("released task: state %s attempts %d owner %q version %d", got.State, got.Attempts, got.LeaseOwner, got.AssignmentVersion)
		}
		again, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "next", Lease: time.Minute})
		if err != nil || again.AssignmentVersion != claimed.AssignmentVersion+1 {
			t.Fatalf("claim after the release = %v, %v; want version %d", again, err, claimed.AssignmentVersion+1)
		}
	})
}

func mustGet(t *testing.T, b *bundle, id string) *ledger.Task {
	t.Helper()
	got, err := b.l.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
