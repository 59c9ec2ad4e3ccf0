package local_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/deliver"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestSecurityPoliciesThroughTheHTTPAPIWithIssuedTokens: the submit
// handler's security policies hold as deployed — over HTTP, behind the JWT
// authorizer, on tokens a real (local) issuer signed, with the ledger on
// each backend (kumo and moto) — not only in handler tests that fake the
// authorizer's context. The approver policy is APPROVER_CLAIM=groups,
// APPROVER_CLAIM_VALUE=approvers, ALLOW_SELF_APPROVAL=false; DIRECT_DELIVER
// is its default (ApproversOnly); the daily quota is small.
//
//   - A direct deliver submit is an approver's permission: anyone else gets
//     403 direct-deliver-forbidden and nothing is written or delivered.
//   - A task whose one provider call could exceed the caller's whole daily
//     quota is refused 422 exceeds-daily-quota, and nothing is written.
//   - The plan of a gated task (where an approval sends the artifact) is
//     shown to an approver; a caller who may neither read nor decide gets
//     404.
//   - Only the whole group name "approvers" makes an approver: groups that
//     contain it as a substring, or as a quoted name (which API Gateway
//     renders as the JSON-looking ["approvers"]), read nothing (404) and
//     decide nothing (403 for the owner, 404 for anyone else); the real
//     approver's approval creates the planned delivery, which is made.
func TestSecurityPoliciesThroughTheHTTPAPIWithIssuedTokens(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		is := newTestIssuer(t)
		policy, err := api.ParseApprovalPolicy("groups", "approvers", "false")
		if err != nil {
			t.Fatal(err)
		}
		b := setupStack(t, local.Options{
			StatusEvery: -1,
			// The backend under test, in its region; setupStack gives the
			// stack's resources a prefix of their own.
			Endpoint: e.Endpoint,
			Region:   e.AWS.Region,
			// kumo wakes a long poll only on a send, so a delayed message
			// could wait out a 20 s poll (local.EmbeddedPollWait); one
			// second costs moto nothing.
			PollWait:         local.EmbeddedPollWait,
			OIDCIssuer:       is.srv.URL,
			OIDCAudience:     []string{"client-1"},
			Approvals:        policy,
			Destinations:     deliver.Config{Simulated: &deliver.SimulatedConfig{}},
			DailyQuotaTokens: "1000",
		})
		notify := b.st.Destinations.Sims[dsim.Notify]
		tok := func(sub string, groups any) string {
			return is.token(t, is.key, map[string]any{"sub": sub, "aud": "client-1", "groups": groups})
		}
		approver := tok("carol", []any{"approvers"})
		staff := func(sub string) string { return tok(sub, []any{"staff"}) }

		// Direct deliver (DirectDeliver=ApproversOnly).
		const directBody = `{"kind":"deliver","input":{"destination":"notify","params":{"to":"requester@example.com"},"payload":{"order":"order-4711"}}}`
		status, body := b.request(t, http.MethodPost, "/tasks", staff("dave"), "order-4711", directBody)
		wantProblem(t, "a non-approver's direct deliver", status, body, http.StatusForbidden, api.TypeDirectDeliverForbidden)
		refusedID := b.st.Ledger.TaskID("jwt:dave", "order-4711")
		if status, body := b.request(t, http.MethodGet, "/tasks/"+refusedID, staff("dave"), "", ""); status != http.StatusNotFound {
			t.Errorf("the refused direct deliver's task: GET = %d %s, want 404", status, body)
		}
		if items := itemsMentioning(t, e, b.st.Names.TasksTable, "jwt:dave"); len(items) > 0 {
			t.Errorf("a refused direct deliver wrote %d item(s) for its caller: %v", len(items), items)
		}
		status, body = b.request(t, http.MethodPost, "/tasks", approver, "order-4711", directBody)
		if status != http.StatusAccepted {
			t.Fatalf("an approver's direct deliver: %d %s, want 202", status, body)
		}
		directID := taskID(t, body)
		// The scan above sees what a submit writes: the accepted one's item.
		if items := itemsMentioning(t, e, b.st.Names.TasksTable, "jwt:carol"); len(items) == 0 {
			t.Errorf("the scan finds no item of the approver's accepted direct deliver")
		}

		// A call larger than the whole daily quota: 8,192 output tokens when
		// max_tokens is unset, against 1,000.
		status, body = b.request(t, http.MethodPost, "/tasks", staff("erin"), "big-1", `{"kind":"generate","input":{"prompt":"Say hello"}}`)
		wantProblem(t, "a call larger than the whole daily quota", status, body, http.StatusUnprocessableEntity, api.TypeExceedsDailyQuota)
		if status, body := b.request(t, http.MethodGet, "/tasks/"+b.st.Ledger.TaskID("jwt:erin", "big-1"), staff("erin"), "", ""); status != http.StatusNotFound {
			t.Errorf("the over-quota task: GET = %d %s, want 404", status, body)
		}

		// A gated task with a deliver plan, within the quota (9 prompt
		// bytes + 32 and 50 output tokens).
		alice := staff("alice")
		status, body = b.request(t, http.MethodPost, "/tasks", alice, "gated-1",
			`{"kind":"generate","input":{"prompt":"Say hello","max_tokens":50},"approval":{"required":true},"deliver":[{"destination":"notify","params":{"to":"requester@example.com"}}]}`)
		if status != http.StatusAccepted {
			t.Fatalf("gated submit: %d %s, want 202", status, body)
		}
		id := taskID(t, body)
		var owned gatedView
		eventually(t, 60*time.Second, "task "+id+" to await approval", func() bool {
			_, body := b.request(t, http.MethodGet, "/tasks/"+id, alice, "", "")
			owned = gatedView{}
			_ = json.Unmarshal([]byte(body), &owned)
			return owned.State == "awaiting_approval"
		})
		if owned.Plan != nil {
			t.Errorf("the owner, who may not decide (no self-approval), is shown the plan: %+v", owned.Plan)
		}

		// The plan, to the approver who decides on it.
		status, body = b.request(t, http.MethodGet, "/tasks/"+id, approver, "", "")
		var seen gatedView
		_ = json.Unmarshal([]byte(body), &seen)
		if status != http.StatusOK || seen.Plan == nil || len(seen.Plan.Deliver) != 1 ||
			seen.Plan.Deliver[0].Destination != "notify" || string(seen.Plan.Deliver[0].Params) != `{"to":"requester@example.com"}` {
			t.Errorf("the approver reads the gated task: %d %s, want 200 with plan.deliver [notify {\"to\":\"requester@example.com\"}]", status, body)
		}
		if status, body := b.request(t, http.MethodGet, "/tasks/"+id, staff("mallory"), "", ""); status != http.StatusNotFound {
			t.Errorf("a third caller reads the gated task: %d %s, want 404", status, body)
		}

		// Look-alike groups: none of them is the approver group.
		approve := `{"artifact_sha256":"` + owned.ResultSHA256 + `"}`
		for _, g := range []any{[]any{"trainee,approvers"}, "approvers (pending)", []any{`"approvers"`}} {
			if status, body := b.request(t, http.MethodGet, "/tasks/"+id, tok("mallory", g), "", ""); status != http.StatusNotFound {
				t.Errorf("another caller with groups %#v reads the gated task: %d %s, want 404", g, status, body)
			}
			if status, body := b.request(t, http.MethodPost, "/tasks/"+id+"/approve", tok("mallory", g), "", approve); status != http.StatusNotFound {
				t.Errorf("another caller with groups %#v approves: %d %s, want 404", g, status, body)
			}
			if status, body := b.request(t, http.MethodPost, "/tasks/"+id+"/approve", tok("alice", g), "", approve); status != http.StatusForbidden {
				t.Errorf("the owner with groups %#v approves: %d %s, want 403", g, status, body)
			}
		}
		if _, body := b.request(t, http.MethodGet, "/tasks/"+id, alice, "", ""); !strings.Contains(body, `"state":"awaiting_approval"`) {
			t.Fatalf("after the refused approvals the task is not awaiting approval: %s", body)
		}

		// The approver's approval: 200, and the planned delivery is made.
		status, body = b.request(t, http.MethodPost, "/tasks/"+id+"/approve", approver, "", approve)
		var approved gatedView
		_ = json.Unmarshal([]byte(body), &approved)
		if status != http.StatusOK || approved.State != "completed" || len(approved.Deliveries) != 1 || approved.Deliveries[0].Destination != "notify" {
			t.Fatalf("the approver approves: %d %s, want 200, completed, one notify delivery", status, body)
		}
		deliveryID := approved.Deliveries[0].TaskID
		for _, d := range []struct{ id, bearer string }{{deliveryID, alice}, {directID, approver}} {
			eventually(t, 60*time.Second, "delivery "+d.id+" to complete", func() bool {
				_, body := b.request(t, http.MethodGet, "/tasks/"+d.id, d.bearer, "", "")
				return strings.Contains(body, `"state":"completed"`)
			})
			if n := notify.SideEffects(d.id); n != 1 {
				t.Errorf("notify side effects of %s = %d, want 1", d.id, n)
			}
		}
		if n := notify.SideEffects(refusedID); n != 0 {
			t.Errorf("the refused direct deliver was delivered %d time(s)", n)
		}
	})
}

// gatedView is what these checks read of a task view.
type gatedView struct {
	State        string `json:"state"`
	ResultSHA256 string `json:"result_sha256"`
	Plan         *struct {
		Deliver []struct {
			Destination string          `json:"destination"`
			Params      json.RawMessage `json:"params"`
		} `json:"deliver"`
	} `json:"plan"`
	Deliveries []struct {
		TaskID      string `json:"task_id"`
		Destination string `json:"destination"`
	} `json:"deliveries"`
}

func taskID(t *testing.T, body string) string {
	t.Helper()
	var v struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.TaskID == "" {
		t.Fatalf("no task_id in %s (%v)", body, err)
	}
	return v.TaskID
}

// wantProblem checks a problem+json answer's status and type.
func wantProblem(t *testing.T, what string, status int, body string, wantStatus int, wantType string) {
	t.Helper()
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal([]byte(body), &p)
	if status != wantStatus || p.Type != wantType {
		t.Errorf("%s: %d %s, want %d %s", what, status, body, wantStatus, wantType)
	}
}

// itemsMentioning scans table with the backend's own client and returns
// every item with a value that mentions s (a refused caller's scope): the
// ledger's task item and anything recorded beside it name their caller.
func itemsMentioning(t *testing.T, e *testenv.Env, table, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	p := dynamodb.NewScanPaginator(e.DDB, &dynamodb.ScanInput{TableName: &table})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		for _, it := range page.Items {
			var m map[string]any
			if err := attributevalue.UnmarshalMap(it, &m); err != nil {
				t.Fatalf("scan %s: %v", table, err)
			}
			if strings.Contains(fmt.Sprint(m), s) {
				out = append(out, m)
			}
		}
	}
	return out
}
