package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

const gatedResult = `{"text":"the summary"}`

// awaiting creates a gated task and completes it as the worker does: it
// lands in awaiting_approval with its result saved.
func awaiting(t *testing.T, b *bundle, key string) *ledger.Task {
	t.Helper()
	return awaitingFor(t, b, key, time.Hour, `[{"destination":"notify","params":{}},{"destination":"crm","params":{}}]`)
}

// awaitingFor is awaiting with an approval window of ttl and the plan's
// deliveries (a JSON list).
func awaitingFor(t *testing.T, b *bundle, key string, ttl time.Duration, deliver string) *ledger.Task {
	t.Helper()
	ctx := context.Background()
	n := newTask(key, "p")
	n.ApprovalTTL = ttl
	n.Plan = `{"approval":{"expires_in_seconds":` + strconv.Itoa(int(ttl/time.Second)) + `,"required":true},"deliver":` + deliver + `}`
	task, err := b.l.Create(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.l.Complete(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: gatedResult, ApprovalTTL: c.ApprovalTTL()})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != ledger.StateAwaitingApproval || got.ResultSHA256 != ledger.SHA256Hex(gatedResult) || got.ApprovalState != ledger.ApprovalPending {
		t.Fatalf("completed gated task = state %s sha %s approval %s", got.State, got.ResultSHA256, got.ApprovalState)
	}
	if got.DueAt != b.clock.Now().Add(ttl).UnixMilli() || got.StateShard == "" {
		t.Fatalf("awaiting task not indexed at its approval deadline: due_at %d shard %q", got.DueAt, got.StateShard)
	}
	return got
}

func approveReq(task *ledger.Task, sha, edited string, n int) ledger.ApproveRequest {
	approved := sha
	if edited != "" {
		approved = ledger.SHA256Hex(edited)
	}
	r := ledger.ApproveRequest{ArtifactSHA256: sha, EditedResult: edited, By: "jwt:bob", Note: "ok", Policy: "test"}
	for i := range n {
		r.Deliveries = append(r.Deliveries, ledger.NewTask{
			Scope: task.Scope, IdempotencyKey: ledger.DeliveryKey(task.TaskID, approved, i, task.ApprovalRound),
			Kind: ledger.KindDeliver, Input: fmt.Sprintf(`{"destination":"d%d","params":{},"payload":%s}`, i, gatedResult),
			PayloadSHA256: fmt.Sprintf("deliver-%d-%s", i, approved), ParentTaskID: task.TaskID,
		})
	}
	return r
}

// countDeliveries counts deliver tasks of parent in the table (a scan of
// the ids an approval of it could have created).
func deliveriesOf(t *testing.T, b *bundle, parent *ledger.Task, sha string, n, round int) []*ledger.Task {
	t.Helper()
	var out []*ledger.Task
	for i := range n {
		d, err := b.l.Get(context.Background(), b.l.TaskID(parent.Scope, ledger.DeliveryKey(parent.TaskID, sha, i, round)))
		if errors.Is(err, ledger.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func TestCompletionOfAGatedTaskAwaitsApproval(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		awaiting(t, b, "gate")
		// A caller that does not pass the gate is corrected from the item.
		n := newTask("gate-nohint", "p")
		n.ApprovalTTL = 2 * time.Hour
		task, _ := b.l.Create(ctx, n)
		c, _ := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		got, err := b.l.Complete(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: gatedResult})
		if err != nil || got.State != ledger.StateAwaitingApproval || got.DueAt != b.clock.Now().Add(2*time.Hour).UnixMilli() {
			t.Fatalf("Complete without the gate = %v, %v; want awaiting_approval due in 2h", got, err)
		}
		// And an ungated task is never put in awaiting_approval by a wrong hint.
		plain := mustCreate(t, b, "plain")
		c, _ = b.l.Claim(ctx, plain.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		got, err = b.l.Complete(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: gatedResult, ApprovalTTL: time.Hour})
		if err != nil || got.State != ledger.StateCompleted || got.ResultSHA256 == "" {
			t.Fatalf("Complete of a plain task with a wrong hint = %v, %v; want completed", got, err)
		}
	})
}

func TestApproveCreatesEveryDeliveryAtomically(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "approve")
		sha := task.ResultSHA256

		// Stale hash: 409 material, nothing written.
		if _, _, err := b.l.Approve(ctx, task, approveReq(task, ledger.SHA256Hex("other"), "", 2)); !errors.As(err, new(*ledger.ArtifactChangedError)) {
			t.Fatalf("approve with a stale hash = %v, want ArtifactChangedError", err)
		}

		// A failed delivery put (its id already taken) cancels the whole
		// transaction: the task stays awaiting, no other delivery exists.
		req := approveReq(task, sha, "", 3)
		squat := req.Deliveries[2]
		if _, err := b.l.Create(ctx, squat); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.l.Approve(ctx, task, req); !errors.As(err, new(*ledger.ConflictError)) {
			t.Fatalf("approve with a taken delivery id = %v, want ConflictError", err)
		}
		if cur, _ := b.l.Get(ctx, task.TaskID); cur.State != ledger.StateAwaitingApproval || len(cur.DeliveryIDs) != 0 {
			t.Fatalf("after the failed approval the task is %s with %d deliveries", cur.State, len(cur.DeliveryIDs))
		}
		if ds := deliveriesOf(t, b, task, sha, 2, 0); len(ds) != 0 {
			t.Fatalf("the failed approval left %d deliveries", len(ds))
		}

		// An injected send failure on the transaction: nothing written.
		cfg := e.AWS.Copy()
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Operation == "TransactWriteItems" {
				return faultinject.SendFailure
			}
			return ""
		}))
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		faulty, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := faulty.Approve(ctx, task, approveReq(task, sha, "", 2)); err == nil {
			t.Fatal("approve through a failing transaction succeeded")
		}
		if cur, _ := b.l.Get(ctx, task.TaskID); cur.State != ledger.StateAwaitingApproval {
			t.Fatalf("after the failed send the task is %s", cur.State)
		}

		// The real approval: completed, exactly two deliveries, each queued
		// and linked; the same approval again is a replay with the same ids.
		got, replay, err := b.l.Approve(ctx, task, approveReq(task, sha, "", 2))
		if err != nil || replay {
			t.Fatalf("approve = %v replay=%v", err, replay)
		}
		if got.State != ledger.StateCompleted || got.ApprovalState != ledger.ApprovalApproved || got.DecidedBy != "jwt:bob" || got.ApprovalSHA256 != sha || len(got.DeliveryIDs) != 2 {
			t.Fatalf("approved task = %+v", got.Approval)
		}
		ds := deliveriesOf(t, b, task, sha, 2, 0)
		if len(ds) != 2 {
			t.Fatalf("%d deliveries, want 2", len(ds))
		}
		for i, d := range ds {
			if d.State != ledger.StateQueued || d.Kind != ledger.KindDeliver || d.ParentTaskID != task.TaskID || d.TaskID != got.DeliveryIDs[i] || d.StateShard == "" || d.DueAt == 0 {
				t.Fatalf("delivery %d = state %s kind %s parent %s id %s", i, d.State, d.Kind, d.ParentTaskID, d.TaskID)
			}
		}
		again, replay, err := b.l.Approve(ctx, task, approveReq(task, sha, "", 2))
		if err != nil || !replay || fmt.Sprint(again.DeliveryIDs) != fmt.Sprint(got.DeliveryIDs) {
			t.Fatalf("second approve = %v replay=%v ids %v", err, replay, again)
		}
		// Reject after approval: conflict, nothing changes.
		if _, _, err := b.l.Reject(ctx, again, "x", "", ""); !errors.As(err, new(*ledger.ConflictError)) {
			t.Fatalf("reject of an approved task = %v", err)
		}
	})
}

func TestApproveEditedKeepsTheGeneratedArtifact(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "edit")
		edited := `{"text":"the edited summary"}`
		got, _, err := b.l.Approve(ctx, task, approveReq(task, task.ResultSHA256, edited, 1))
		if err != nil {
			t.Fatal(err)
		}
		if got.Result != edited || got.ResultSHA256 != ledger.SHA256Hex(edited) || got.GeneratedResult != gatedResult || got.GeneratedSHA256 != task.ResultSHA256 {
			t.Fatalf("edited approval stored result %q generated %q", got.Result, got.GeneratedResult)
		}
		if ds := deliveriesOf(t, b, task, ledger.SHA256Hex(edited), 1, 0); len(ds) != 1 {
			t.Fatalf("edited approval: %d deliveries keyed by the edited hash", len(ds))
		}
		if _, replay, err := b.l.Approve(ctx, task, approveReq(task, task.ResultSHA256, edited, 1)); err != nil || !replay {
			t.Fatalf("repeated edited approval = %v replay=%v", err, replay)
		}
		// Withdrawn and edited again: the generated artifact is still the
		// one the provider made, not the first edit.
		back, err := b.l.Withdraw(ctx, task.TaskID, "jwt:bob", "one more change", "")
		if err != nil {
			t.Fatal(err)
		}
		second := `{"text":"the edited summary, edited again"}`
		again, _, err := b.l.Approve(ctx, back, approveReq(back, back.ResultSHA256, second, 1))
		if err != nil {
			t.Fatal(err)
		}
		if again.Result != second || again.GeneratedResult != gatedResult || again.GeneratedSHA256 != task.ResultSHA256 {
			t.Fatalf("second edit: result %q, generated %q (%s), want the provider's %q (%s)", again.Result, again.GeneratedResult, again.GeneratedSHA256, gatedResult, task.ResultSHA256)
		}
	})
}

// TestApproveLostReplyIsRecognised: the transaction applied, its reply was
// lost; the approval still answers with the task as approved.
func TestApproveLostReplyIsRecognised(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := awaiting(t, b, "approve-lost-"+mode)
		l, arm, lost := lossy(t, b, mode, "TransactWriteItems")
		arm()
		got, _, err := l.Approve(ctx, task, approveReq(task, task.ResultSHA256, "", 2))
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil || got.State != ledger.StateCompleted || len(got.DeliveryIDs) != 2 {
			t.Fatalf("approve after a lost reply = %v, %v", got, err)
		}
		if ds := deliveriesOf(t, b, task, task.ResultSHA256, 2, 0); len(ds) != 2 {
			t.Fatalf("%d deliveries", len(ds))
		}
	})
}

// TestApproveRacingRejectAndWithdraw: concurrent decisions; exactly one
// outcome holds and the deliveries agree with it.
func TestApproveRacingRejectAndWithdraw(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		for round := range 4 {
			task := awaiting(t, b, fmt.Sprintf("race-%d", round))
			var wg sync.WaitGroup
			var approveErr, rejectErr error
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, _, approveErr = b.l.Approve(ctx, task, approveReq(task, task.ResultSHA256, "", 2))
			}()
			go func() { defer wg.Done(); _, _, rejectErr = b.l.Reject(ctx, task, "jwt:carol", "no", "") }()
			wg.Wait()
			cur, err := b.l.Get(ctx, task.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			ds := deliveriesOf(t, b, task, task.ResultSHA256, 2, 0)
			switch cur.State {
			case ledger.StateCompleted:
				if approveErr != nil || rejectErr == nil || len(ds) != 2 {
					t.Fatalf("approve won: approve %v reject %v deliveries %d", approveErr, rejectErr, len(ds))
				}
				// A withdraw races a worker claiming a delivery.
				var withdrawErr, claimErr error
				wg.Add(2)
				go func() { defer wg.Done(); _, withdrawErr = b.l.Withdraw(ctx, task.TaskID, "jwt:bob", "stop", "") }()
				go func() {
					defer wg.Done()
					_, claimErr = b.l.Claim(ctx, ds[0].TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
				}()
				wg.Wait()
				after, _ := b.l.Get(ctx, task.TaskID)
				d0, _ := b.l.Get(ctx, ds[0].TaskID)
				d1, _ := b.l.Get(ctx, ds[1].TaskID)
				switch {
				case withdrawErr == nil:
					if claimErr == nil || after.State != ledger.StateAwaitingApproval || d0.State != ledger.StateCancelled || d1.State != ledger.StateCancelled {
						t.Fatalf("withdraw won but claim %v, task %s, deliveries %s %s", claimErr, after.State, d0.State, d1.State)
					}
				default:
					var se *ledger.DeliveriesStartedError
					if !errors.As(withdrawErr, &se) || claimErr != nil || after.State != ledger.StateCompleted || d0.State != ledger.StateRunning || d1.State != ledger.StateQueued {
						t.Fatalf("claim won but withdraw %v, claim %v, task %s, deliveries %s %s", withdrawErr, claimErr, after.State, d0.State, d1.State)
					}
				}
			case ledger.StateRejected:
				if rejectErr != nil || approveErr == nil || len(ds) != 0 {
					t.Fatalf("reject won: approve %v reject %v deliveries %d", approveErr, rejectErr, len(ds))
				}
			default:
				t.Fatalf("after the race the task is %s", cur.State)
			}
		}
	})
}

func TestWithdrawThenApproveAgain(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "withdraw")
		sha := task.ResultSHA256
		if _, err := b.l.Withdraw(ctx, task.TaskID, "x", "", ""); !errors.As(err, new(*ledger.ConflictError)) {
			t.Fatalf("withdraw before approval = %v, want ConflictError", err)
		}
		first, _, err := b.l.Approve(ctx, task, approveReq(task, sha, "", 2))
		if err != nil {
			t.Fatal(err)
		}
		back, err := b.l.Withdraw(ctx, task.TaskID, "jwt:bob", "wrong customer", "")
		if err != nil {
			t.Fatal(err)
		}
		if back.State != ledger.StateAwaitingApproval || back.ApprovalState != ledger.ApprovalWithdrawn || back.ApprovalRound != 1 ||
			len(back.DeliveryIDs) != 0 || len(back.WithdrawnDeliveryIDs) != 2 || back.ExpiresAt != 0 || back.DueAt != task.ApprovalDeadlineMs {
			t.Fatalf("withdrawn task = %s %+v", back.State, back.Approval)
		}
		if again, err := b.l.Withdraw(ctx, task.TaskID, "jwt:bob", "", ""); err != nil || again.WriteNonce != back.WriteNonce {
			t.Fatalf("repeated withdraw = %v (changed: %v)", err, again != nil && again.WriteNonce != back.WriteNonce)
		}
		for _, d := range deliveriesOf(t, b, task, sha, 2, 0) {
			if d.State != ledger.StateCancelled || d.StateShard != "" {
				t.Fatalf("withdrawn delivery %s is %s", d.TaskID, d.State)
			}
		}
		// Approving again is new work: new deliveries, the old stay cancelled.
		second, replay, err := b.l.Approve(ctx, back, approveReq(back, sha, "", 2))
		if err != nil || replay || len(second.DeliveryIDs) != 2 || second.DeliveryIDs[0] == first.DeliveryIDs[0] {
			t.Fatalf("re-approval = %v replay=%v ids %v (first %v)", err, replay, second.DeliveryIDs, first.DeliveryIDs)
		}
		// A claimed delivery blocks the withdrawal, naming it.
		if _, err := b.l.Claim(ctx, second.DeliveryIDs[1], ledger.ClaimOptions{Owner: "w", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		_, err = b.l.Withdraw(ctx, task.TaskID, "jwt:bob", "", "")
		var se *ledger.DeliveriesStartedError
		if !errors.As(err, &se) || len(se.Deliveries) != 2 || len(ledger.Started(se.Deliveries)) != 1 || ledger.Started(se.Deliveries)[0].State != ledger.StateRunning {
			t.Fatalf("withdraw with a claimed delivery = %v", err)
		}
		if d, _ := b.l.Get(ctx, second.DeliveryIDs[0]); d.State != ledger.StateQueued {
			t.Fatalf("the refused withdrawal touched the unstarted delivery: %s", d.State)
		}
	})
}

func TestRejectAndExpire(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "reject")
		got, replay, err := b.l.Reject(ctx, task, "jwt:carol", "off topic", "p")
		if err != nil || replay || got.State != ledger.StateRejected || got.ApprovalState != ledger.ApprovalRejected ||
			got.ApprovalSHA256 != task.ResultSHA256 || got.DecidedBy != "jwt:carol" || got.ApprovalNote != "off topic" || got.ExpiresAt == 0 {
			t.Fatalf("reject = %v replay=%v %+v", err, replay, got)
		}
		if _, replay, err := b.l.Reject(ctx, task, "jwt:carol", "", ""); err != nil || !replay {
			t.Fatalf("second reject = %v replay=%v", err, replay)
		}
		if _, _, err := b.l.Approve(ctx, got, approveReq(got, got.ResultSHA256, "", 1)); !errors.As(err, new(*ledger.ConflictError)) {
			t.Fatalf("approve of a rejected task = %v", err)
		}

		exp := awaiting(t, b, "expire")
		parked, err := b.l.ExpireApproval(ctx, exp, ledger.Review{Summary: "expired"})
		if err != nil || parked.State != ledger.StateNeedsReview || parked.ReviewReason != ledger.ReviewApprovalExpired {
			t.Fatalf("expire = %v %v", parked, err)
		}
		if _, _, err := b.l.Approve(ctx, exp, approveReq(exp, exp.ResultSHA256, "", 1)); !errors.As(err, new(*ledger.ConflictError)) {
			t.Fatalf("approve after expiry = %v", err)
		}
	})
}

// TestEveryCompletionPathHonoursTheGate: a readback's completion and a
// lapsed attempt's completion of a gated task land in awaiting_approval
// too, with the result hash, due at the approval deadline.
func TestEveryCompletionPathHonoursTheGate(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		gated := func(key string) *ledger.Task {
			n := newTask(key, "p")
			n.ApprovalTTL = time.Hour
			task, err := b.l.Create(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		check := func(name string, got *ledger.Task, err error) {
			t.Helper()
			if err != nil || got.State != ledger.StateAwaitingApproval || got.ResultSHA256 != ledger.SHA256Hex(gatedResult) ||
				got.DueAt != b.clock.Now().Add(time.Hour).UnixMilli() || got.ExpiresAt != 0 {
				t.Fatalf("%s: %v, %v", name, got, err)
			}
		}
		// Readback: the reconciler completes an unknown task.
		c := gated("gate-readback")
		b.clock.Advance(time.Minute)
		u, err := b.l.ExpireToUnknown(ctx, c.TaskID, c.AssignmentVersion)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.l.CompleteFromReadback(ctx, u.TaskID, u.AssignmentVersion, ledger.Completion{Result: gatedResult, ApprovalTTL: u.ApprovalTTL()})
		check("readback", got, err)

		// Lapsed: the slow worker's result after an unknown_outcome park.
		c = gated("gate-lapsed")
		b.clock.Advance(time.Minute)
		if u, err = b.l.ExpireToUnknown(ctx, c.TaskID, c.AssignmentVersion); err == nil {
			_, err = b.l.Park(ctx, u, ledger.ParkOptions{State: ledger.StateUnknown, Version: u.AssignmentVersion},
				ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "lapsed"})
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err = b.l.CompleteLapsed(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: gatedResult, ApprovalTTL: c.ApprovalTTL()}, lapsedBy)
		check("lapsed", got, err)
		if r, _ := b.l.GetReview(ctx, c.TaskID); r.ReviewStatus != ledger.ReviewResolved {
			t.Fatalf("lapsed review is %s", r.ReviewStatus)
		}
	})
}

// TestCreateRefusesApprovalBeyondMax: an approval deadline beyond
// MaxApprovalTTL (which the spend package's budget retention is derived
// from) is refused and writes nothing; MaxApprovalTTL itself is accepted.
func TestCreateRefusesApprovalBeyondMax(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		n := newTask("gate-too-long", "p")
		n.ApprovalTTL = ledger.MaxApprovalTTL + time.Second
		if _, err := b.l.Create(ctx, n); err == nil || !strings.Contains(err.Error(), "MaxApprovalTTL") {
			t.Fatalf("Create with ApprovalTTL %s = %v; want refused naming MaxApprovalTTL", n.ApprovalTTL, err)
		}
		if _, err := b.l.Get(ctx, b.l.TaskID(n.Scope, n.IdempotencyKey)); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("after the refusal: %v; want nothing written", err)
		}
		n.ApprovalTTL = ledger.MaxApprovalTTL
		if task, err := b.l.Create(ctx, n); err != nil || task.ApprovalTTL() != ledger.MaxApprovalTTL {
			t.Fatalf("Create with ApprovalTTL = MaxApprovalTTL: %+v, %v", task, err)
		}
	})
}
