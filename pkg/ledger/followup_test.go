package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// followUps are n deliver tasks of parent, keyed key/0 .. key/n-1.
func followUps(parent *ledger.Task, key string, n int) []ledger.NewTask {
	var out []ledger.NewTask
	for i := range n {
		out = append(out, ledger.NewTask{Scope: parent.Scope, IdempotencyKey: key + "/" + string(rune('0'+i)), Kind: ledger.KindDeliver,
			ParentTaskID: parent.TaskID, Input: `{"destination":"notify","params":{},"payload":{"i":` + string(rune('0'+i)) + `}}`,
			PayloadSHA256: "sha-f" + string(rune('0'+i)), Provenance: &ledger.Provenance{Type: ledger.ProvenancePlan, TaskID: parent.TaskID}})
	}
	return out
}

func claimed(t *testing.T, b *bundle, key string) *ledger.Task {
	t.Helper()
	task := mustCreate(t, b, key)
	c, err := b.l.Claim(context.Background(), task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantFollowUps asserts that each of fs exists once, queued, its parent
// the task.
func wantFollowUps(t *testing.T, b *bundle, fs []ledger.NewTask) {
	t.Helper()
	for _, f := range fs {
		d, err := b.l.Get(context.Background(), b.l.TaskID(f.Scope, f.IdempotencyKey))
		if err != nil {
			t.Fatalf("follow-up %s: %v", f.IdempotencyKey, err)
		}
		if d.State != ledger.StateQueued || d.ParentTaskID != f.ParentTaskID || d.Kind != ledger.KindDeliver || d.Provenance == nil {
			t.Fatalf("follow-up %s = state %s parent %s kind %s provenance %v", f.IdempotencyKey, d.State, d.ParentTaskID, d.Kind, d.Provenance)
		}
	}
}

func wantNoFollowUps(t *testing.T, b *bundle, fs []ledger.NewTask) {
	t.Helper()
	for _, f := range fs {
		if _, err := b.l.Get(context.Background(), b.l.TaskID(f.Scope, f.IdempotencyKey)); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("follow-up %s of a write that did not apply: %v, want not found", f.IdempotencyKey, err)
		}
	}
}

// A completion whose transaction reply is lost — the SDK's retry then
// fails on the first send's own write, or the caller sees a timeout — is
// recognised as applied by its write_nonce: the result is saved once and
// every follow-up exists once. A repeat with the same nonce (the worker's
// save after an error) is recognised too and creates nothing more.
func TestCompleteWithFollowUpsIsOneWriteUnderALostReply(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := claimed(t, b, "fu-lost-"+mode)
		fs := followUps(task, "plan-"+task.TaskID, 2)
		l, arm, lost := lossy(t, b, mode, "TransactWriteItems")
		arm()
		nonce := ledger.NewNonce()
		opts := []ledger.WriteOption{ledger.WithNonce(nonce), ledger.WithFollowUps(map[ledger.State][]ledger.NewTask{ledger.StateCompleted: fs})}
		got, err := l.Complete(ctx, task.TaskID, task.AssignmentVersion, ledger.Completion{Result: `{"text":"hi"}`}, opts...)
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("Complete after a lost reply = %v; want the completion it made", err)
		}
		if got.State != ledger.StateCompleted || got.Result != `{"text":"hi"}` {
			t.Fatalf("completed task = state %s result %q", got.State, got.Result)
		}
		wantFollowUps(t, b, fs)
		if stored, _ := b.l.Get(ctx, task.TaskID); len(stored.DeliveryIDs) != len(fs) {
			t.Fatalf("the completed task lists deliveries %v, want the %d of its plan", stored.DeliveryIDs, len(fs))
		}
		again, err := b.l.Complete(ctx, task.TaskID, task.AssignmentVersion, ledger.Completion{Result: `{"text":"hi"}`}, opts...)
		if err != nil || again.State != ledger.StateCompleted {
			t.Fatalf("the repeat with the same nonce = %v, %v; want the task as written", again, err)
		}
		wantFollowUps(t, b, fs)
	})
}

// A completion refused by its fence creates no follow-up; one whose
// follow-up id is taken is refused whole: no result, no other follow-up.
func TestCompleteWithFollowUpsIsAllOrNothing(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := claimed(t, b, "fu-fenced")
		fs := followUps(task, "plan-"+task.TaskID, 2)
		by := ledger.WithFollowUps(map[ledger.State][]ledger.NewTask{ledger.StateCompleted: fs})
		if _, err := b.l.Complete(ctx, task.TaskID, task.AssignmentVersion-1, ledger.Completion{Result: `{}`}, by); !errors.As(err, new(*ledger.FencedError)) {
			t.Fatalf("Complete at a stale version = %v, want *FencedError", err)
		}
		wantNoFollowUps(t, b, fs)

		if _, err := b.l.Create(ctx, fs[1]); err != nil {
			t.Fatal(err)
		}
		_, err := b.l.Complete(ctx, task.TaskID, task.AssignmentVersion, ledger.Completion{Result: `{}`}, by)
		var ce *ledger.ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("Complete with a follow-up id taken = %v, want *ConflictError", err)
		}
		wantNoFollowUps(t, b, fs[:1])
		if cur, _ := b.l.Get(ctx, task.TaskID); cur.State != ledger.StateRunning || cur.HasResult() {
			t.Fatalf("task after the refused transaction = %s (result %v), want running without a result", cur.State, cur.HasResult())
		}
	})
}

// The follow-ups are chosen by the state the write leaves: a gated task's
// completion creates the awaiting_approval ones, never the completed ones.
func TestCompleteCreatesTheFollowUpsOfItsToState(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		n := newTask("fu-gated", "p")
		n.ApprovalTTL = time.Hour
		task, err := b.l.Create(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if task, err = b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		done, waiting := followUps(task, "done", 1), followUps(task, "waiting", 1)
		by := ledger.WithFollowUps(map[ledger.State][]ledger.NewTask{ledger.StateCompleted: done, ledger.StateAwaitingApproval: waiting})
		// The caller misjudges the gate: the ledger corrects it from the
		// item, and the follow-ups with it.
		got, err := b.l.Complete(ctx, task.TaskID, task.AssignmentVersion, ledger.Completion{Result: `{}`}, by)
		if err != nil || got.State != ledger.StateAwaitingApproval {
			t.Fatalf("Complete = %v, %v; want awaiting_approval", got, err)
		}
		wantFollowUps(t, b, waiting)
		wantNoFollowUps(t, b, done)
	})
}

// A park with follow-ups whose transaction reply is lost is recognised as
// applied; its follow-up exists once.
func TestParkWithFollowUpsIsOneWriteUnderALostReply(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := claimed(t, b, "park-fu-lost-"+mode)
		fs := followUps(task, "parked-"+task.TaskID, 1)
		l, arm, lost := lossy(t, b, mode, "TransactWriteItems")
		arm()
		got, err := l.Park(ctx, task, ledger.ParkOptions{State: ledger.StateRunning, Version: task.AssignmentVersion, FollowUps: fs},
			ledger.Review{Reason: ledger.ReviewBudgetExhausted, Summary: "out of budget"})
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil || got.State != ledger.StateNeedsReview {
			t.Fatalf("Park after a lost reply = %v, %v; want the park it made", got, err)
		}
		wantFollowUps(t, b, fs)
	})
}
