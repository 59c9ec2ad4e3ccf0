package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// A lapse the reconciler re-queued (Requeue from running: the attempt
// counted, its outcome open since its lease's end, its history entry
// unknown) whose age budget then ends while it waits is moved to unknown
// for a readback (AwaitReadback) before its worker — stalled after its
// claim, before any call — gives it back from there (ReleaseUnknown; the
// worker's ReleaseRequeued, refused by that move, is followed by it).
// What the lapse recorded is as void as after ReleaseRequeued: no call was
// ever made under the assignment, and the claim read no open outcome, so
// none may stay open and the history may not keep the attempt as unknown —
// else a later park says the provider may have acted on a call that never
// started, and the reconciler waits a call timeout for it (DESIGN §1.4,
// §1.6).
func TestReleaseUnknownAfterAwaitReadbackVoidsTheRequeuedLapse(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		const lease = 30 * time.Second
		task := mustCreate(t, b, "release-after-await-"+mode)
		c1, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		if _, open := c1.OpenUncertainty(); open {
			t.Fatalf("setup: the first claim reads an open outcome")
		}
		b.clock.Advance(lease + time.Second)
		q, err := b.l.Requeue(ctx, task.TaskID, ledger.StateRunning, c1.AssignmentVersion, ledger.InAttempt(c1))
		if err != nil {
			t.Fatal(err)
		}
		since, open := q.OpenUncertainty()
		if !open {
			t.Fatal("setup: the re-queued lapse left no open outcome")
		}
		// The age budget ends while the task waits: the reconciler's relay
		// moves it to unknown for the readback to decide.
		b.clock.Set(time.UnixMilli(c1.DeadlineMs).Add(time.Second))
		if ok, _ := q.BudgetLeft(b.clock.Now()); ok {
			t.Fatal("setup: budget left past the age deadline")
		}
		if _, err := b.l.AwaitReadback(ctx, task.TaskID, c1.AssignmentVersion, since); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.ReleaseRequeued(ctx, task.TaskID, c1.AssignmentVersion, ledger.InAttempt(c1)); !isFenced(err) {
			t.Fatalf("ReleaseRequeued of an unknown task = %v, want fenced", err)
		}

		l, arm, lost := lossy(t, b, mode, "UpdateItem")
		arm()
		r, err := l.ReleaseUnknown(ctx, task.TaskID, c1.AssignmentVersion, ledger.InAttempt(c1))
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("ReleaseUnknown after a lost reply = %v", err)
		}
		stored, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []*ledger.Task{r, stored} {
			if got.State != ledger.StateQueued || got.Attempts != 0 {
				t.Fatalf("released: %s with %d attempts, want queued with none counted", got.State, got.Attempts)
			}
			if since, open := got.OpenUncertainty(); open {
				t.Errorf("released: an outcome stays open since %s (open_unknown_ms %d, error %s), though no call was ever made",
					since.Format(time.RFC3339), got.OpenUnknownMs, got.ErrorClass)
			}
			for _, a := range got.History() {
				if a.Outcome == ledger.OutcomeUnknown {
					t.Errorf("released: history keeps attempt %d as unknown (ended %d), though it made no call", a.Attempt, a.EndedMs)
				}
			}
		}
	})
}
