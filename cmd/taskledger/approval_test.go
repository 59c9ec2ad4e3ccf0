package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// awaitingApproval creates a gated task with a one-entry deliver plan and
// completes it (it lands in awaiting_approval).
func awaitingApproval(t *testing.T, b *bundle, key string) *ledger.Task {
	t.Helper()
	task, err := b.l.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: key, Kind: "generate", RequesterEmail: "alice@example.com",
		Input: `{"prompt":"hi"}`, PayloadSHA256: "sha-" + key, ApprovalTTL: time.Hour,
		Plan: `{"approval":{"expires_in_seconds":3600,"required":true},"deliver":[{"destination":"notify","params":{"to":"a@example.com"}}]}`})
	if err == nil {
		task, err = b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
	}
	if err == nil {
		task, err = b.l.Complete(ctx, task.TaskID, task.AssignmentVersion, ledger.Completion{Result: `{"text":"hello"}`, ApprovalTTL: time.Hour})
	}
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestApproveRejectWithdrawCommands(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := awaitingApproval(t, b, "cli-approve")
		// Usage errors change nothing.
		if r := b.cli(nil, append(b.flags(), "approve", task.TaskID)...); r.code != 2 || !strings.Contains(r.stderr, "--artifact-sha256") {
			t.Fatalf("approve without a hash = %d %q", r.code, r.stderr)
		}
		if r := b.cli(nil, append(b.flags(), "approve", task.TaskID, "--artifact-sha256", strings.Repeat("0", 64))...); r.code != 1 || !strings.Contains(r.stderr, "artifact changed") {
			t.Fatalf("approve with a stale hash = %d %q", r.code, r.stderr)
		}
		r := b.must(t, nil, append(b.flags(), "approve", task.TaskID, "--artifact-sha256", task.ResultSHA256, "--note", "fine", "--json")...)
		var v struct {
			State      string            `json:"state"`
			Approval   map[string]string `json:"approval"`
			Deliveries []struct {
				TaskID, Destination, State string
			} `json:"deliveries"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if v.State != "completed" || v.Approval["decided_by"] != "operator:alice-ops" || v.Approval["policy"] != "operator_cli" || len(v.Deliveries) != 1 || v.Deliveries[0].Destination != "notify" || v.Deliveries[0].State != "queued" {
			t.Fatalf("approve printed %s", r.stdout)
		}
		r = b.must(t, nil, append(b.flags(), "withdraw", task.TaskID, "--note", "stop")...)
		if !strings.Contains(r.stdout, "awaiting_approval") || !strings.Contains(r.stdout, "cancelled") {
			t.Fatalf("withdraw printed %s", r.stdout)
		}
		r = b.must(t, nil, append(b.flags(), "reject", task.TaskID, "--note", "no")...)
		if cur, _ := b.l.Get(ctx, task.TaskID); cur.State != ledger.StateRejected || cur.DecidedBy != "operator:alice-ops" {
			t.Fatalf("after reject: %s by %s (%s)", cur.State, cur.DecidedBy, r.stdout)
		}
		if r := b.cli(nil, append(b.flags(), "withdraw", task.TaskID)...); r.code != 1 || !strings.Contains(r.stderr, "conflict") {
			t.Fatalf("withdraw of a rejected task = %d %q", r.code, r.stderr)
		}
	})
}

// An approval or a withdrawal made with the CLI tells the people the HTTP
// API's would (TASKLEDGER_NOTIFICATIONS, the value the stack's functions
// run with): the requester that the task completed, the approvers that a
// decision is needed again — each notification a deliver task created in
// the decision's transaction. Without the variable the CLI says that
// nobody was notified.
func TestCLIDecisionsNotifyAsTheAPIDoes(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		env := map[string]string{"USER": "alice-ops", followup.EnvVar: `{"page_origin":"https://tasks.example.com",` +
			`"approvers":{"email":["approver@example.com"]},"requester":{"email":true}}`}
		task := awaitingApproval(t, b, "cli-notify")
		r := b.cli(env, append(b.flags(), "approve", task.TaskID, "--artifact-sha256", task.ResultSHA256)...)
		if r.code != 0 || strings.Contains(r.stderr, "nobody was notified") {
			t.Fatalf("approve = %d %q", r.code, r.stderr)
		}
		completed := followup.Key(task.TaskID, followup.EventCompleted, int64(task.ApprovalRound), followup.EmailDestination)
		if n, err := b.l.Get(ctx, b.l.TaskID(task.Scope, completed)); err != nil || n == nil || n.ParentTaskID != task.TaskID {
			t.Fatalf("after the CLI's approval, requester notification %s: %+v, %v; want a deliver task of %s", completed, n, err, task.TaskID)
		}
		r = b.cli(env, append(b.flags(), "withdraw", task.TaskID, "--note", "again")...)
		if r.code != 0 {
			t.Fatalf("withdraw = %d %q", r.code, r.stderr)
		}
		again := followup.Key(task.TaskID, followup.EventApprovalWithdrawn, int64(task.ApprovalRound)+1, followup.EmailDestination)
		if n, err := b.l.Get(ctx, b.l.TaskID(task.Scope, again)); err != nil || n == nil {
			t.Fatalf("after the CLI's withdrawal, approvers' notification %s: %+v, %v", again, n, err)
		}

		quiet := awaitingApproval(t, b, "cli-notify-none")
		r = b.cli(nil, append(b.flags(), "approve", quiet.TaskID, "--artifact-sha256", quiet.ResultSHA256)...)
		if r.code != 0 || !strings.Contains(r.stderr, "nobody was notified") {
			t.Fatalf("approve without %s = %d %q; want it to say nobody was notified", followup.EnvVar, r.code, r.stderr)
		}
	})
}
