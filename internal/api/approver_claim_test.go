package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestApproverClaimMatchesWholeGroupNames: the approver claim names a
// group; only a caller in that very group is an approver. A group whose
// name merely contains it between spaces or commas ("approvers (pending)",
// "trainee,approvers") is another group: its members neither read another
// caller's gated task nor decide on it. The claim arrives as API Gateway
// renders it (a plain string, a list as "[a b]") or as a JSON array.
func TestApproverClaimMatchesWholeGroupNames(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withHandler(func(h *api.Handler) {
			h.Auth = api.AuthConfig{Mode: api.AuthJWT}
			h.Approvals = api.ApprovalPolicy{Claim: "groups", Value: "approvers"}
		}))
		groups := func(sub, v string) reqOpt { return withClaims(sub, map[string]string{"groups": v}) }
		id := view(t, b.do(t, submitReq("wf-groups", planBody, groups("alice", "staff")))).TaskID
		generateAs(t, b, id)
		approve := `{"artifact_sha256":"` + ledger.SHA256Hex(generated) + `"}`

		notApprovers := []string{
			"approvers (pending)",   // a plain string naming another group
			"trainee,approvers",     // one group whose name has a comma
			"[trainee,approvers]",   // API Gateway's rendering of ["trainee,approvers"]
			`["trainee,approvers"]`, // the same list as a JSON array
			`["approvers (pending)"]`,
			" approvers",
		}
		for _, g := range notApprovers {
			wantProblem(t, b.do(t, getReq(id, groups("mallory", g))), http.StatusNotFound, api.TypeNotFound)
			wantProblem(t, b.do(t, decisionReq("approve", id, approve, groups("mallory", g))), http.StatusNotFound, api.TypeNotFound)
			// The owner in such a group is no approver either.
			wantProblem(t, b.do(t, decisionReq("approve", id, approve, groups("alice", g))), http.StatusForbidden, api.TypeForbidden)
		}
		if task, _ := b.l.Get(t.Context(), id); task.State != ledger.StateAwaitingApproval {
			t.Fatalf("after the refused decisions the task is %s, want awaiting_approval", task.State)
		}

		approvers := []string{"approvers", "[approvers]", "[staff approvers]"}
		for _, g := range approvers {
			if v := view(t, b.do(t, getReq(id, groups("carol", g)))); v.TaskID != id {
				t.Fatalf("approver with groups %q reads %+v", g, v)
			}
		}
		v := view(t, b.do(t, decisionReq("approve", id, approve, groups("carol", "[staff approvers]"))))
		if v.State != string(ledger.StateCompleted) || v.Approval.DecidedBy != "jwt:carol" {
			t.Fatalf("approved by an approver: %s %+v", v.State, v.Approval)
		}
	})
}

// TestApproverClaimValueThatCannotBeMatchedIsRefused: API Gateway renders a
// list claim as its elements joined by spaces, so a value with a space
// cannot be told from two groups, nor one with a comma from a
// comma-joined group name: such a policy is refused at start-up, saying why.
func TestApproverClaimValueThatCannotBeMatchedIsRefused(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"approvers (pending)", "trainee,approvers", "a\tb", "approvers,"} {
		_, err := api.ParseApprovalPolicy("groups", v, "")
		if err == nil {
			t.Errorf("APPROVER_CLAIM_VALUE=%q was accepted", v)
			continue
		}
		if !strings.Contains(err.Error(), "APPROVER_CLAIM_VALUE") || !strings.Contains(err.Error(), "space") {
			t.Errorf("APPROVER_CLAIM_VALUE=%q refused with %q: want it to name the setting and say why", v, err)
		}
	}
	if p, err := api.ParseApprovalPolicy("groups", " approvers ", ""); err != nil || p.Value != "approvers" {
		t.Errorf("a value with surrounding blanks (trimmed): %+v, %v", p, err)
	}
}
