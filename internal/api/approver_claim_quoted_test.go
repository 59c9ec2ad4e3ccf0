package api_test

import (
	"net/http"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestApproverClaimGroupNamedWithQuotesIsNotTheGroup: API Gateway renders
// a JWT list claim as "[" + its elements joined by spaces + "]", never as
// JSON. A group whose name holds double quotes — `"approvers"`, legal in
// Cognito (group names allow any punctuation, only no whitespace) — is
// another group than approvers, yet its rendering `["approvers"]` parses
// as a JSON array holding approvers. Its members must be no approvers:
// neither read another caller's gated task nor decide on it. The claims
// are rendered by local.ClaimStrings, the API Gateway rendering make run
// emulates, from the list the issuer sends.
func TestApproverClaimGroupNamedWithQuotesIsNotTheGroup(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withHandler(func(h *api.Handler) {
			h.Auth = api.AuthConfig{Mode: api.AuthJWT}
			h.Approvals = api.ApprovalPolicy{Claim: "cognito:groups", Value: "approvers"}
		}))
		rendered := func(groups ...any) string {
			return local.ClaimStrings(map[string]any{"cognito:groups": groups})["cognito:groups"]
		}
		groups := func(sub, v string) reqOpt { return withClaims(sub, map[string]string{"cognito:groups": v}) }
		id := view(t, b.do(t, submitReq("wf-quoted", planBody, groups("alice", rendered("staff"))))).TaskID
		generateAs(t, b, id)
		approve := `{"artifact_sha256":"` + ledger.SHA256Hex(generated) + `"}`

		for _, g := range [][]any{
			{`"approvers"`},             // one group, named with its quotes
			{`"staff",`, `"approvers"`}, // two groups, each with quotes (and a comma)
			{`"appro\u0076ers"`},        // one group with quotes and a backslash
		} {
			claim := rendered(g...)
			wantProblem(t, b.do(t, getReq(id, groups("mallory", claim))), http.StatusNotFound, api.TypeNotFound)
			wantProblem(t, b.do(t, decisionReq("approve", id, approve, groups("mallory", claim))), http.StatusNotFound, api.TypeNotFound)
		}
		if task, _ := b.l.Get(t.Context(), id); task.State != ledger.StateAwaitingApproval {
			t.Fatalf("a member of a group named with quotes decided: the task is %s (approval %q by %q), want awaiting_approval", task.State, task.ApprovalState, task.DecidedBy)
		}
	})
}
