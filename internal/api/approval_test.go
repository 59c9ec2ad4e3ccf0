package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

const planBody = `{"kind":"generate","input":{"prompt":"summarise"},
 "approval":{"required":true,"expires_in_seconds":3600},
 "deliver":[{"destination":"notify","params":{"to":"requester@example.com"}},{"destination":"crm"}]}`

const generated = `{"text":"the summary"}`

func decisionReq(verb, id, body string, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	return newReq(http.MethodPost, "/tasks/{id}/"+verb, "/tasks/"+id+"/"+verb, id, body, opts...)
}

// withClaims is asJWT with extra claims.
func withClaims(sub string, claims map[string]string) reqOpt {
	return func(r *events.APIGatewayV2HTTPRequest) {
		asJWT(sub)(r)
		for k, v := range claims {
			r.RequestContext.Authorizer.JWT.Claims[k] = v
		}
	}
}

// generateAs completes the task as the worker would (claim, then the
// fenced completion the gate turns into awaiting_approval).
func generateAs(t *testing.T, b *bundle, id string) {
	t.Helper()
	ctx := context.Background()
	c, err := b.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.Complete(ctx, id, c.AssignmentVersion, ledger.Completion{Result: generated, ApprovalTTL: c.ApprovalTTL()}); err != nil {
		t.Fatal(err)
	}
}

func TestApprovalGateOverHTTP(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		resp := b.do(t, submitReq("wf-1", planBody))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID
		if v := view(t, resp); v.Approval == nil || v.Approval.State != ledger.ApprovalPending {
			t.Fatalf("a gated task's view has approval %+v", v.Approval)
		}
		// The plan is part of the payload hash.
		wantProblem(t, b.do(t, submitReq("wf-1", strings.Replace(planBody, `"crm"`, `"publish"`, 1))), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
		wantStatus(t, b.do(t, submitReq("wf-1", planBody)), http.StatusOK)
		drainQueue(t, e)

		// Not yet generated: nothing to decide.
		sha := ledger.SHA256Hex(generated)
		wantProblem(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+sha+`"}`)), http.StatusConflict, api.TypeStateConflict)

		generateAs(t, b, id)
		v := view(t, b.do(t, getReq(id)))
		if v.State != string(ledger.StateAwaitingApproval) || string(v.Result) != generated || v.ResultSHA256 != sha || v.Approval.ArtifactSHA256 != sha || v.Approval.ExpiresAt == "" {
			t.Fatalf("awaiting view = %s result %s sha %s approval %+v", v.State, v.Result, v.ResultSHA256, v.Approval)
		}

		// A stale hash: 409 artifact-changed naming the current hash.
		p := wantProblem(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+strings.Repeat("0", 64)+`","note":"ok"}`)), http.StatusConflict, api.TypeArtifactChanged)
		if p.ResultSHA256 != sha {
			t.Fatalf("artifact-changed names %q, want %q", p.ResultSHA256, sha)
		}
		// Bad bodies change nothing.
		wantProblem(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"ABC"}`)), http.StatusBadRequest, api.TypeInvalidBody)
		wantProblem(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+sha+`","extra":1}`)), http.StatusBadRequest, api.TypeInvalidBody)
		wantProblem(t, b.do(t, decisionReq("approve", id, "")), http.StatusBadRequest, api.TypeInvalidBody)

		resp = b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+sha+`","note":"looks right"}`))
		wantStatus(t, resp, http.StatusOK)
		v = view(t, resp)
		if v.State != string(ledger.StateCompleted) || v.Approval.State != ledger.ApprovalApproved || v.Approval.DecidedBy != api.Anonymous || v.Approval.Note != "looks right" || len(v.Deliveries) != 2 {
			t.Fatalf("approved view = %s %+v deliveries %v", v.State, v.Approval, v.Deliveries)
		}
		if v.Deliveries[0].Destination != "notify" || v.Deliveries[1].Destination != "crm" || v.Deliveries[0].State != "queued" {
			t.Fatalf("deliveries = %+v", v.Deliveries)
		}
		sent, _ := drainQueue(t, e)
		for _, d := range v.Deliveries {
			if sent[d.TaskID] != 1 {
				t.Fatalf("delivery %s sent %d times (sent %v)", d.TaskID, sent[d.TaskID], sent)
			}
		}
		// The delivery is an ordinary task of kind deliver, linked to its parent.
		dv := view(t, b.do(t, getReq(v.Deliveries[0].TaskID)))
		if dv.Kind != ledger.KindDeliver || dv.ParentTaskID != id || dv.State != "queued" {
			t.Fatalf("delivery view = %+v", dv)
		}
		d, _ := b.l.Get(context.Background(), v.Deliveries[0].TaskID)
		var in map[string]json.RawMessage
		if json.Unmarshal([]byte(d.Input), &in) != nil || string(in["payload"]) != generated || d.IdempotencyKey != ledger.DeliveryKey(id, sha, 0, 0) {
			t.Fatalf("delivery input %s key %s", d.Input, d.IdempotencyKey)
		}

		// The same approval again: 200, same deliveries, nothing new sent.
		again := view(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+sha+`","note":"looks right"}`)))
		if again.Deliveries[0].TaskID != v.Deliveries[0].TaskID || again.Deliveries[1].TaskID != v.Deliveries[1].TaskID {
			t.Fatalf("replayed approval gave deliveries %v, first %v", again.Deliveries, v.Deliveries)
		}
		// Reject after approve: 409, nothing changes.
		wantProblem(t, b.do(t, decisionReq("reject", id, `{"note":"no"}`)), http.StatusConflict, api.TypeStateConflict)

		// Withdraw while unstarted: deliveries cancelled, back to awaiting.
		w := view(t, b.do(t, decisionReq("withdraw", id, `{"note":"wrong customer"}`)))
		if w.State != string(ledger.StateAwaitingApproval) || w.Approval.State != ledger.ApprovalWithdrawn || len(w.Deliveries) != 2 || w.Deliveries[0].State != "cancelled" {
			t.Fatalf("withdrawn view = %s %+v %+v", w.State, w.Approval, w.Deliveries)
		}
		if w.Approval.Round != 1 || v.Approval.Round != 0 {
			t.Fatalf("approval rounds %d before and %d after the withdrawal, want 0 and 1", v.Approval.Round, w.Approval.Round)
		}
		// A repeat of the first approve (a lost reply retried after the
		// withdraw) names the round it was shown: 409, nothing changed.
		p = wantProblem(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+sha+`","approval_round":0,"note":"looks right"}`)), http.StatusConflict, api.TypeApprovalRoundChanged)
		if p.Field != "approval_round" {
			t.Fatalf("round-changed problem names field %q", p.Field)
		}
		if cur := view(t, b.do(t, getReq(id))); cur.State != string(ledger.StateAwaitingApproval) || len(cur.Deliveries) != 2 {
			t.Fatalf("after the stale approve: %s, %d deliveries; want awaiting, the 2 withdrawn", cur.State, len(cur.Deliveries))
		}
		wantProblem(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+sha+`","approval_round":-1}`)), http.StatusBadRequest, api.TypeInvalidBody)
		// Approve again with the round now shown (new deliveries), a worker claims one, withdraw is 409 naming it.
		r2 := view(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+sha+`","approval_round":1}`)))
		if len(r2.Deliveries) != 4 || r2.Deliveries[0].State != "queued" || r2.Deliveries[2].State != "cancelled" {
			t.Fatalf("re-approved deliveries = %+v", r2.Deliveries)
		}
		if _, err := b.l.Claim(context.Background(), r2.Deliveries[1].TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		p = wantProblem(t, b.do(t, decisionReq("withdraw", id, "")), http.StatusConflict, api.TypeDeliveriesStarted)
		if len(p.Deliveries) != 2 || p.Deliveries[1].State != "running" || !strings.Contains(p.Detail, r2.Deliveries[1].TaskID) {
			t.Fatalf("deliveries-started problem = %+v", p)
		}
		if cur := view(t, b.do(t, getReq(id))); cur.State != string(ledger.StateCompleted) || cur.Deliveries[0].State != "queued" {
			t.Fatalf("after the refused withdrawal: %s %+v", cur.State, cur.Deliveries)
		}
	})
}

func TestEditRejectAndPlanValidation(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		// Edit and approve: the edit is the result, the generated one kept.
		id := view(t, b.do(t, submitReq("wf-edit", planBody))).TaskID
		generateAs(t, b, id)
		sha := ledger.SHA256Hex(generated)
		v := view(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+sha+`","edited_result":{"text":"better"}}`)))
		edited := `{"text":"better"}`
		if string(v.Result) != edited || v.ResultSHA256 != ledger.SHA256Hex(edited) || v.GeneratedSHA256 != sha || v.Approval.ArtifactSHA256 != ledger.SHA256Hex(edited) {
			t.Fatalf("edited approval view: result %s sha %s generated %s approval %+v", v.Result, v.ResultSHA256, v.GeneratedSHA256, v.Approval)
		}

		// Reject: terminal, repeatable, never delivered.
		id2 := view(t, b.do(t, submitReq("wf-reject", planBody))).TaskID
		generateAs(t, b, id2)
		r := view(t, b.do(t, decisionReq("reject", id2, `{"note":"off topic"}`)))
		if r.State != string(ledger.StateRejected) || r.Approval.State != ledger.ApprovalRejected || len(r.Deliveries) != 0 || string(r.Result) != generated {
			t.Fatalf("rejected view = %+v", r)
		}
		wantStatus(t, b.do(t, decisionReq("reject", id2, "")), http.StatusOK)
		wantProblem(t, b.do(t, decisionReq("approve", id2, `{"artifact_sha256":"`+sha+`"}`)), http.StatusConflict, api.TypeStateConflict)

		// A task without a gate cannot be decided on.
		plain := view(t, b.do(t, submitReq("wf-plain", body("x")))).TaskID
		if v := view(t, b.do(t, getReq(plain))); v.Approval != nil {
			t.Fatalf("a plain task shows approval %+v", v.Approval)
		}
		wantProblem(t, b.do(t, decisionReq("reject", plain, "")), http.StatusConflict, api.TypeStateConflict)

		bad := map[string]string{
			"bad destination":        `{"kind":"generate","input":{"prompt":"x"},"approval":{"required":true},"deliver":[{"destination":"Not A Name"}]}`,
			"unknown approval field": `{"kind":"generate","input":{"prompt":"x"},"approval":{"required":true,"who":"me"}}`,
			"deadline too short":     `{"kind":"generate","input":{"prompt":"x"},"approval":{"required":true,"expires_in_seconds":5}}`,
			"params not an object":   `{"kind":"generate","input":{"prompt":"x"},"approval":{"required":true},"deliver":[{"destination":"crm","params":[1]}]}`,
			"too many deliveries":    `{"kind":"generate","input":{"prompt":"x"},"approval":{"required":true},"deliver":[` + strings.Repeat(`{"destination":"crm"},`, 10) + `{"destination":"crm"}]}`,
		}
		for name, body := range bad {
			p := wantProblem(t, b.do(t, submitReq("wf-bad", body)), http.StatusBadRequest, api.TypeInvalidBody)
			if p.Field == "" {
				t.Errorf("%s: problem names no field", name)
			}
		}
		wantProblem(t, b.do(t, submitReq("approval:"+id+":x:0", body("x"))), http.StatusBadRequest, api.TypeIdempotencyKeyInvalid)
		wantProblem(t, b.do(t, submitReq("notify:"+id+":completed:1:email", body("x"))), http.StatusBadRequest, api.TypeIdempotencyKeyInvalid)
		for _, task := range scanTasks(t, e) {
			if task.IdempotencyKey == "wf-bad" || strings.HasPrefix(task.IdempotencyKey, "approval:"+id+":x") {
				t.Fatalf("a refused submission wrote task %s", task.TaskID)
			}
		}
	})
}

func TestApproverPolicy(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withHandler(func(h *api.Handler) {
			h.Auth = api.AuthConfig{Mode: api.AuthJWT}
			h.Approvals = api.ApprovalPolicy{Claim: "cognito:groups", Value: "approvers", NoSelfApproval: true}
		}))
		approver := map[string]string{"cognito:groups": "[staff approvers]"}
		alice := withClaims("alice", approver)
		id := view(t, b.do(t, submitReq("wf-policy", planBody, alice))).TaskID
		generateAs(t, b, id)
		sha := ledger.SHA256Hex(generated)
		approve := `{"artifact_sha256":"` + sha + `"}`
		// The owner, though an approver, may not approve her own task.
		wantProblem(t, b.do(t, decisionReq("approve", id, approve, alice)), http.StatusForbidden, api.TypeForbidden)
		// Bob is no approver: another caller's task does not exist for him.
		wantProblem(t, b.do(t, getReq(id, asJWT("bob"))), http.StatusNotFound, api.TypeNotFound)
		wantProblem(t, b.do(t, decisionReq("approve", id, approve, asJWT("bob"))), http.StatusNotFound, api.TypeNotFound)
		// Carol is an approver: she reads the artifact and approves it.
		carol := withClaims("carol", approver)
		if v := view(t, b.do(t, getReq(id, carol))); v.ResultSHA256 != sha {
			t.Fatalf("approver's view = %+v", v)
		}
		v := view(t, b.do(t, decisionReq("approve", id, approve, carol)))
		if v.State != string(ledger.StateCompleted) || v.Approval.DecidedBy != "jwt:carol" || !strings.Contains(v.Approval.Policy, "cognito:groups") {
			t.Fatalf("approved by carol: %+v", v.Approval)
		}
		d, _ := b.l.Get(context.Background(), v.Deliveries[0].TaskID)
		if d.Scope != "jwt:alice" || d.DecidedBy != "jwt:carol" {
			t.Fatalf("delivery scope %s decided by %s", d.Scope, d.DecidedBy)
		}
	})
}

func TestParseApprovalPolicy(t *testing.T) {
	if p, err := api.ParseApprovalPolicy("", "", ""); err != nil || p.NoSelfApproval || p.Claim != "" {
		t.Fatalf("default policy = %+v, %v", p, err)
	}
	if _, err := api.ParseApprovalPolicy("", "", "false"); err == nil {
		t.Fatal("no approver claim and no self-approval was accepted: nobody could decide")
	}
	if _, err := api.ParseApprovalPolicy("approver", "", "maybe"); err == nil {
		t.Fatal("ALLOW_SELF_APPROVAL=maybe was accepted")
	}
	if p, err := api.ParseApprovalPolicy("approver", "", "false"); err != nil || p.Value != "true" || !p.NoSelfApproval {
		t.Fatalf("claim policy = %+v, %v", p, err)
	}
}

// TestApproveAnswers200AfterALostReply: the approval's transaction is
// applied and its reply lost (the SDK sees a timeout); the handler
// recognises its own write and answers 200 with the deliveries, which
// exist exactly once.
func TestApproveAnswers200AfterALostReply(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		var armed atomic.Bool
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Operation == "TransactWriteItems" && armed.CompareAndSwap(true, false) {
				return faultinject.LostReply
			}
			return ""
		}))
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		b := setup(t, e, withDynamoDB(func(ledger.DynamoDB) ledger.DynamoDB { return awsclient.DynamoDB(cfg) }))
		id := view(t, b.do(t, submitReq("wf-lost", planBody))).TaskID
		generateAs(t, b, id)
		armed.Store(true)
		resp := b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+ledger.SHA256Hex(generated)+`"}`))
		if inj.Total(faultinject.LostReply) != 1 {
			t.Fatal("the lost reply was not injected")
		}
		wantStatus(t, resp, http.StatusOK)
		v := view(t, resp)
		if v.State != string(ledger.StateCompleted) || len(v.Deliveries) != 2 {
			t.Fatalf("after the lost reply: %s with %d deliveries", v.State, len(v.Deliveries))
		}
		n := 0
		for _, task := range scanTasks(t, e) {
			if task.ParentTaskID == id && task.Kind == ledger.KindDeliver {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("%d deliver tasks in the table, want 2", n)
		}
	})
}

func TestDecisionsOnAnUngatedTaskAnswerThatThereIsNothingToDecide(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withHandler(func(h *api.Handler) {
			h.Auth = api.AuthConfig{Mode: api.AuthJWT}
			h.Approvals = api.ApprovalPolicy{Claim: "cognito:groups", Value: "approvers", NoSelfApproval: true}
		}))
		// Alice is no approver, and self-approval is off: neither is why
		// her own ungated task cannot be decided.
		alice := asJWT("alice")
		id := view(t, b.do(t, submitReq("no-gate", body("x"), alice))).TaskID
		generateAs(t, b, id)
		before, err := b.l.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for verb, req := range map[string]string{"approve": `{"artifact_sha256":"` + before.ResultSHA256 + `"}`, "reject": `{}`, "withdraw": `{}`} {
			p := wantProblem(t, b.do(t, decisionReq(verb, id, req, alice)), http.StatusConflict, api.TypeStateConflict)
			if !strings.Contains(p.Detail, "no approval gate") || p.State != string(ledger.StateCompleted) {
				t.Errorf("%s: problem = %+v, want the missing gate named and state completed", verb, p)
			}
		}
		after, err := b.l.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if after.State != ledger.StateCompleted || after.UpdatedMs != before.UpdatedMs || after.ApprovalState != "" {
			t.Fatalf("a refused decision changed the task: %+v", after)
		}
	})
}
