package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestWaitAdmission: the holder of a running assignment puts the task back
// to retry_wait until the next admission window with its attempt given
// back; a claim before then is refused not_due; a stale holder is fenced.
func TestWaitAdmission(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "wait-admission")
		c1, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		at := b.clock.Now().Add(40 * time.Second).Truncate(time.Millisecond)
		w, err := b.l.WaitAdmission(ctx, task.TaskID, c1.AssignmentVersion, at)
		if err != nil {
			t.Fatal(err)
		}
		if w.State != ledger.StateRetryWait || w.Attempts != 0 || w.NotBefore != at.UnixMilli() || w.DueAt != at.UnixMilli() ||
			w.LeaseOwner != "" || w.AssignmentVersion != c1.AssignmentVersion || w.ErrorClass != "" {
			t.Fatalf("after WaitAdmission: %+v; want retry_wait, 0 attempts, not_before = due_at = %d, no lease, version kept, no error", w, at.UnixMilli())
		}
		_, err = b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		var nc *ledger.NotClaimableError
		if !errors.As(err, &nc) || nc.Reason != ledger.ReasonNotDue {
			t.Fatalf("claim before the window = %v, want not_due", err)
		}
		_, err = b.l.WaitAdmission(ctx, task.TaskID, c1.AssignmentVersion, at)
		var fe *ledger.FencedError
		if !errors.As(err, &fe) {
			t.Fatalf("a second WaitAdmission by the released holder = %v, want *FencedError", err)
		}
		b.clock.Set(at)
		c2, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil || c2.Attempts != 1 {
			t.Fatalf("claim in the next window: %v, attempts %v; want claimed as attempt 1", err, c2)
		}
	})
}
