package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestApproveAfterTheApprovalDeadlineIsRefused: the approval deadline
// (approval_deadline_ms) is the end of the approval window (DESIGN §10:
// "approval deadline passes → reconciler parks it approval_expired"). An
// approval that arrives after the deadline but before the reconciler's next
// walk must not create deliveries, so Approve is conditioned on the
// deadline as well as the state: otherwise an expired approval window
// would still deliver (and the reconciler's park would lose the race and
// be counted "raced").
func TestApproveAfterTheApprovalDeadlineIsRefused(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "late-approval")
		if task.ApprovalDeadlineMs != b.clock.Now().Add(time.Hour).UnixMilli() {
			t.Fatalf("approval deadline %d, want now+1h", task.ApprovalDeadlineMs)
		}
		b.clock.Advance(time.Hour + time.Minute) // the window is over; no reconciler walk yet

		got, _, err := b.l.Approve(ctx, task, approveReq(task, task.ResultSHA256, "", 2))
		ds := deliveriesOf(t, b, task, task.ResultSHA256, 2, 0)
		if err == nil || len(ds) != 0 {
			state := ledger.State("")
			if got != nil {
				state = got.State
			}
			t.Fatalf("approval 1m after the approval deadline = state %q, err %v, %d deliveries created; want refused (expired) and none", state, err, len(ds))
		}
	})
}

// TestRetriedExpiredApprovalKeepsTheNewGeneratedArtifact: an approval with
// an edit keeps the generated artifact once
// (generated_sha256/generated_result) — DESIGN §10: "generated artifact
// and approval decision are separate facts". The approval_expired review
// offers `review retry`: the result is generated again under the same task
// id and awaits approval anew. If an earlier round was approved with an
// edit and withdrawn, the retry clears generated_*; were it kept, a new
// edit would keep the FIRST generation's hash and the second generated
// artifact would be lost: neither result (now the edit) nor
// generated_result would hold it.
func TestRetriedExpiredApprovalKeepsTheNewGeneratedArtifact(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "regen-after-expiry")
		edit1 := `{"text":"edited once"}`
		if _, _, err := b.l.Approve(ctx, task, approveReq(task, task.ResultSHA256, edit1, 2)); err != nil {
			t.Fatal(err)
		}
		w, err := b.l.Withdraw(ctx, task.TaskID, "jwt:bob", "wrong", "test")
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(2 * time.Hour)
		if _, err := b.l.ExpireApproval(ctx, w, ledger.Review{TaskID: w.TaskID, Summary: "expired"}); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "op"}); err != nil {
			t.Fatal(err)
		}
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		gen2 := `{"text":"generated again"}`
		again, err := b.l.Complete(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: gen2, ApprovalTTL: c.ApprovalTTL()})
		if err != nil || again.State != ledger.StateAwaitingApproval {
			t.Fatalf("completion of the retry = %v, %v; want awaiting_approval", again, err)
		}
		edit2 := `{"text":"edited twice"}`
		got, _, err := b.l.Approve(ctx, again, approveReq(again, again.ResultSHA256, edit2, 2))
		if err != nil {
			t.Fatal(err)
		}
		if got.GeneratedSHA256 != ledger.SHA256Hex(gen2) || got.GeneratedResult != gen2 {
			t.Fatalf("after the retried generation was approved with an edit: generated_sha256 %.12s generated_result %q; want the second generation %.12s %q (it is in neither result nor generated_result)",
				got.GeneratedSHA256, got.GeneratedResult, ledger.SHA256Hex(gen2), gen2)
		}
	})
}

// A withdrawal opens a new round with a window of its own: an approval
// withdrawn after the first round's deadline (its deliveries held
// unstarted) can be decided again, within the task's approval TTL from
// the withdrawal. Keeping the first deadline would answer the withdrawal
// 200 and then refuse every decision, leaving the task to be parked
// approval_expired and generated again.
func TestWithdrawalOpensAFreshApprovalWindow(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "withdraw-late")
		if _, _, err := b.l.Approve(ctx, task, approveReq(task, task.ResultSHA256, "", 1)); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(90 * time.Minute) // past the first round's deadline (1 h)
		w, err := b.l.Withdraw(ctx, task.TaskID, "jwt:bob", "wrong recipient", "")
		if err != nil {
			t.Fatal(err)
		}
		want := b.clock.Now().Add(time.Hour).UnixMilli()
		if w.State != ledger.StateAwaitingApproval || w.ApprovalDeadlineMs != want || w.DueAt != want {
			t.Fatalf("withdrawn: %s, deadline %d, due %d; want awaiting_approval due at the new deadline %d", w.State, w.ApprovalDeadlineMs, w.DueAt, want)
		}
		b.clock.Advance(30 * time.Minute)
		again, _, err := b.l.Approve(ctx, w, approveReq(w, w.ResultSHA256, "", 1))
		if err != nil || again.State != ledger.StateCompleted {
			t.Fatalf("approval in the new round = %v; want completed", err)
		}
	})
}

// The new round's window never reaches past MaxApprovalTTL after the
// result was saved: a task that spent waits no longer than the spend
// package's retention assumes, however often it is withdrawn.
func TestWithdrawalWindowEndsWithinMaxApprovalTTLOfTheResult(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "withdraw-capped")
		if _, _, err := b.l.Approve(ctx, task, approveReq(task, task.ResultSHA256, "", 1)); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(ledger.MaxApprovalTTL - 30*time.Minute)
		w, err := b.l.Withdraw(ctx, task.TaskID, "jwt:bob", "", "")
		if err != nil {
			t.Fatal(err)
		}
		if limit := task.CompletedMs + ledger.MaxApprovalTTL.Milliseconds(); w.ApprovalDeadlineMs != limit {
			t.Fatalf("deadline %d, want the cap %d (result saved + MaxApprovalTTL)", w.ApprovalDeadlineMs, limit)
		}
	})
}

// A gated task completes only through an approval: an operator's
// "completed" on a task parked approval_expired (or parked for any reason)
// is refused as an invalid action and changes nothing — it would replace
// the artifact with the operator's note and show a completed task whose
// approval is still pending, with none of its plan delivered.
func TestOperatorCannotCompleteAGatedTask(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "gated-operator")
		b.clock.Advance(2 * time.Hour)
		parked, err := b.l.ExpireApproval(ctx, task, ledger.Review{TaskID: task.TaskID, Summary: "expired"})
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionCompleted, By: "op", Note: "looked fine"})
		if !errors.Is(err, ledger.ErrInvalidAction) {
			t.Fatalf("operator completed on a gated task = %v, want ErrInvalidAction", err)
		}
		got, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != ledger.StateNeedsReview || got.ResultSHA256 != parked.ResultSHA256 || r.ReviewStatus != ledger.ReviewOpen {
			t.Fatalf("after the refused action: task %s (result %s, was %s), review %s", got.State, got.ResultSHA256, parked.ResultSHA256, r.ReviewStatus)
		}
		if _, _, _, err := b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "op", Note: "nobody decided"}); err != nil {
			t.Fatalf("operator failed on the same task = %v, want it allowed", err)
		}
	})
}

// Past the last window (MaxApprovalTTL after the result was saved) a
// withdrawal still stops what the approval started — its unstarted
// deliveries are cancelled — but the round it opens is due at once, for the
// reconciler to park approval_expired, and no approver is asked for a
// decision nobody could make. Reachable while the approved task is
// retained: an approval late in a 30-day window, withdrawn after it.
func TestWithdrawalPastTheLastWindowStopsTheDeliveriesAndAsksNobody(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		got := awaitingFor(t, b, "withdraw-past-cap", ledger.MaxApprovalTTL, `[{"destination":"notify","params":{}}]`)
		b.clock.Advance(ledger.MaxApprovalTTL - time.Hour) // approved an hour before its deadline
		approved, _, err := b.l.Approve(ctx, got, approveReq(got, got.ResultSHA256, "", 1))
		if err != nil || approved.State != ledger.StateCompleted || len(approved.DeliveryIDs) != 1 {
			t.Fatalf("approval = %v, %v", approved, err)
		}
		b.clock.Advance(2 * time.Hour) // within the completed task's retention, past the last window
		notified := 0
		w, err := b.l.Withdraw(ctx, got.TaskID, "jwt:bob", "wrong recipient", "", func(*ledger.Task) []ledger.NewTask {
			notified++
			return nil
		})
		if err != nil {
			t.Fatalf("withdrawal past the last window = %v; want the deliveries stopped", err)
		}
		d, err := b.l.Get(ctx, approved.DeliveryIDs[0])
		if err != nil {
			t.Fatal(err)
		}
		if d.State != ledger.StateCancelled || notified != 0 || w.State != ledger.StateAwaitingApproval || w.DueAt > b.clock.Now().UnixMilli() {
			t.Fatalf("delivery %s, approvers asked %d time(s), task %s due %d (now %d); want cancelled, none, due at once",
				d.State, notified, w.State, w.DueAt, b.clock.Now().UnixMilli())
		}
	})
}

// The reconciler parks an expired approval conditioned on the deadline it
// read (due_at), not only the state and version: a round a withdrawal
// opened since its read is left to the approvers. The approval and the
// withdrawal land between the read and the park only when the API's clock
// runs behind the reconciler's; the test's clock plays both.
func TestExpiredApprovalParkFromAStaleReadLeavesAReopenedRound(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "expire-stale-read")
		deadline := time.UnixMilli(task.ApprovalDeadlineMs)
		b.clock.Set(deadline.Add(time.Second))
		stale, err := b.l.Get(ctx, task.TaskID) // the reconciler's read: the deadline has passed
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Set(deadline.Add(-time.Second)) // the API's clock, behind
		approved, _, err := b.l.Approve(ctx, stale, approveReq(stale, stale.ResultSHA256, "", 1))
		if err != nil {
			t.Fatal(err)
		}
		w, err := b.l.Withdraw(ctx, approved.TaskID, "jwt:bob", "wrong recipient", "")
		if err != nil || w.DueAt == stale.DueAt {
			t.Fatalf("withdrawal = %v (due %d, read %d); want a new round with its own deadline", err, w.DueAt, stale.DueAt)
		}
		b.clock.Set(deadline.Add(2 * time.Second))
		if _, err := b.l.ExpireApproval(ctx, stale, ledger.Review{TaskID: stale.TaskID, Summary: "expired"}); !errors.As(err, new(*ledger.ConflictError)) {
			t.Fatalf("park of the reopened round from the stale read = %v, want a ConflictError", err)
		}
		if got, err := b.l.Get(ctx, task.TaskID); err != nil || got.State != ledger.StateAwaitingApproval || got.ApprovalRound != 1 {
			t.Fatalf("after the refused park: %v, %v; want awaiting_approval in round 1", got, err)
		}
	})
}
