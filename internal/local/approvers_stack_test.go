package local_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/testenv"
)

// request sends method path with a bearer token (and, for a POST, body
// and an Idempotency-Key) and returns the status and body.
func (b stackBundle) request(t *testing.T, method, path, bearer, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, b.st.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// TestStackApproverPolicy: make run's submit handler decides by the
// approver policy a deployment reads (APPROVER_CLAIM, APPROVER_CLAIM_VALUE,
// ALLOW_SELF_APPROVAL: local.Options.Approvals), on tokens of a real
// issuer through the emulated JWT authorizer — so the policy can be tried
// locally. Only whole group names count: "trainee,approvers" and
// "approvers (pending)" are other groups.
func TestStackApproverPolicy(t *testing.T) {
	t.Parallel()
	is := newTestIssuer(t)
	policy, err := api.ParseApprovalPolicy("groups", "approvers", "true")
	if err != nil {
		t.Fatal(err)
	}
	b := setupStack(t, local.Options{StatusEvery: -1, OIDCIssuer: is.srv.URL, OIDCAudience: []string{"client-1"}, Approvals: policy,
		Destinations: deliver.Config{Simulated: &deliver.SimulatedConfig{}}})
	tok := func(sub string, groups any) string {
		return is.token(t, is.key, map[string]any{"sub": sub, "aud": "client-1", "groups": groups})
	}

	alice := tok("alice", []any{"staff"})
	status, body := b.request(t, http.MethodPost, "/tasks", alice, "gated-1",
		`{"kind":"generate","input":{"prompt":"hello"},"approval":{"required":true},"deliver":[{"destination":"notify","params":{"to":"requester@example.com"}}]}`)
	if status != http.StatusAccepted {
		t.Fatalf("submit = %d %s", status, body)
	}
	var v struct {
		TaskID       string `json:"task_id"`
		State        string `json:"state"`
		ResultSHA256 string `json:"result_sha256"`
	}
	_ = json.Unmarshal([]byte(body), &v)
	id := v.TaskID
	eventually(t, 20*time.Second, "task "+id+" to await approval", func() bool {
		_, body := b.request(t, http.MethodGet, "/tasks/"+id, alice, "", "")
		_ = json.Unmarshal([]byte(body), &v)
		return v.State == "awaiting_approval"
	})
	approve := `{"artifact_sha256":"` + v.ResultSHA256 + `"}`

	// The owner may decide only as an approver; these groups are not it.
	// (A list element with a space, ["approvers (pending)"], is not among
	// them: API Gateway renders it "[approvers (pending)]", exactly as it
	// renders ["approvers","(pending)"]. Cognito group names have no
	// spaces; with another issuer, name groups so that none holds the
	// approver group's name as a word.)
	for _, g := range []any{[]any{"trainee,approvers"}, []any{"staff", "trainee,approvers"}, "approvers (pending)", "approvers,trainee"} {
		if status, body := b.request(t, http.MethodPost, "/tasks/"+id+"/approve", tok("alice", g), "", approve); status != http.StatusForbidden {
			t.Errorf("the owner with groups %v approves: %d %s, want 403", g, status, body)
		}
		if status, _ := b.request(t, http.MethodGet, "/tasks/"+id, tok("mallory", g), "", ""); status != http.StatusNotFound {
			t.Errorf("another caller with groups %v reads the task: %d, want 404", g, status)
		}
	}
	status, body = b.request(t, http.MethodPost, "/tasks/"+id+"/approve", tok("carol", []any{"approvers"}), "", approve)
	if status != http.StatusOK || !strings.Contains(body, `"decided_by":"jwt:carol"`) {
		t.Fatalf("an approver approves: %d %s, want 200 decided by jwt:carol", status, body)
	}
}

// Without sign-in every caller is anonymous and has no claims: an approver
// claim would leave nobody able to decide, so the stack refuses to start,
// saying why.
func TestStackRefusesAnApproverClaimWithoutSignIn(t *testing.T) {
	t.Parallel()
	_, err := local.Start(t.Context(), local.Options{Addr: "127.0.0.1:0", Prefix: testenv.UniquePrefix(), StatusEvery: -1,
		Approvals: api.ApprovalPolicy{Claim: "groups", Value: "approvers"}})
	if err == nil || !strings.Contains(err.Error(), "TASKLEDGER_OIDC_ISSUER") {
		t.Fatalf("Start with an approver claim and no issuer: %v, want it refused naming TASKLEDGER_OIDC_ISSUER", err)
	}
}
