package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

const directNotify = `{"destination":"notify","params":{"to":"customer@example.com"},"payload":{"text":"the approved summary"}}`

// jwtApprovers is a JWT-mode handler with approvers named by the
// cognito:groups claim, the simulated destinations, and direct deliver
// submits set to dd.
func jwtApprovers(t *testing.T, dd api.DirectDeliver) func(*option) {
	reg, err := deliver.NewRegistry(dsim.All(dsim.Options{})...)
	if err != nil {
		t.Fatal(err)
	}
	return withHandler(func(h *api.Handler) {
		h.Auth = api.AuthConfig{Mode: api.AuthJWT}
		h.Approvals = api.ApprovalPolicy{Claim: "cognito:groups", Value: "approvers", NoSelfApproval: true}
		h.Destinations = reg
		h.DirectDeliver = dd
	})
}

var carolApprover = withClaims("carol", map[string]string{"cognito:groups": "[staff approvers]"})

// wantNothingWritten fails if any task in the table has key: a refused
// submit writes nothing.
func wantNothingWritten(t *testing.T, e *testenv.Env, key string) {
	t.Helper()
	for _, task := range scanTasks(t, e) {
		if task.IdempotencyKey == key {
			t.Fatalf("a refused direct deliver wrote task %s (%s, scope %s)", task.TaskID, task.State, task.Scope)
		}
	}
}

// The approval gate has no side door: where an approver claim decides who
// may approve, a caller it does not name cannot deliver the same artifact
// to the same destination by submitting {"kind":"deliver"} — 403, a
// stable type, nothing written — under ApproversOnly, which is also what
// an unset setting means. An approver may; the task records a direct
// provenance naming them, from the authorizer and not from the body.
func TestNonApproverCannotDeliverDirectly(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		for _, dd := range []api.DirectDeliver{"", api.DirectDeliverApproversOnly} {
			b := setup(t, e, jwtApprovers(t, dd))
			key := "direct-bob-" + string(dd)
			resp := b.do(t, submitReq(key, deliverBody(directNotify), asJWT("bob")))
			p := wantProblem(t, resp, http.StatusForbidden, api.TypeDirectDeliverForbidden)
			if p.Field != "kind" || !strings.Contains(p.Detail, "cognito:groups") || !strings.Contains(p.Detail, "Nothing was written") {
				t.Fatalf("setting %q: problem %+v", dd, p)
			}
			wantNothingWritten(t, e, key)
			// Refused before the destinations are consulted: a bad input
			// gets the same 403, never a 400 listing what is configured.
			wantProblem(t, b.do(t, submitReq(key, deliverBody(`{"destination":"fax","payload":{"a":1}}`), asJWT("bob"))), http.StatusForbidden, api.TypeDirectDeliverForbidden)
			wantNothingWritten(t, e, key)
		}
		if sent, _ := drainQueue(t, e); len(sent) != 0 {
			t.Fatalf("messages sent after refused direct delivers: %v", sent)
		}

		b := setup(t, e, jwtApprovers(t, api.DirectDeliverApproversOnly))
		resp := b.do(t, submitReq("direct-carol", deliverBody(directNotify), carolApprover))
		wantStatus(t, resp, http.StatusAccepted)
		v := view(t, resp)
		want := destination.Provenance{Type: destination.ProvenanceDirect, Caller: "jwt:carol"}
		if v.Provenance == nil || *v.Provenance != want {
			t.Fatalf("direct deliver view provenance = %+v, want %+v (%s)", v.Provenance, want, resp.Body)
		}
		stored, err := b.l.Get(context.Background(), v.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Provenance == nil || *stored.Provenance != (ledger.Provenance{Type: ledger.ProvenanceDirect, Caller: "jwt:carol"}) {
			t.Fatalf("stored provenance = %+v", stored.Provenance)
		}
		// A body cannot name a provenance: not beside the task, not in
		// the deliver input.
		for key, body := range map[string]string{
			"prov-top":   `{"kind":"deliver","input":` + directNotify + `,"provenance":{"type":"approval","task_id":"t_x","decided_by":"jwt:carol"}}`,
			"prov-input": `{"kind":"deliver","input":{"destination":"notify","params":{"to":"a@example.com"},"payload":{"a":1},"provenance":{"type":"approval"}}}`,
		} {
			wantStatus(t, b.do(t, submitReq(key, body, carolApprover)), http.StatusBadRequest)
			wantNothingWritten(t, e, key)
		}
	})
}

// Disabled refuses every direct deliver, an approver's too; Anyone lets
// every caller deliver directly. Without an approver claim (the owner
// decides on their own gated task, so nobody is kept from delivering by
// the gate) ApproversOnly lets every caller, as before.
func TestDirectDeliverSetting(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, jwtApprovers(t, api.DirectDeliverDisabled))
		for who, as := range map[string]reqOpt{"bob": asJWT("bob"), "carol": carolApprover} {
			key := "disabled-" + who
			p := wantProblem(t, b.do(t, submitReq(key, deliverBody(directNotify), as)), http.StatusForbidden, api.TypeDirectDeliverForbidden)
			if !strings.Contains(p.Detail, "Disabled") {
				t.Fatalf("Disabled, %s: %+v", who, p)
			}
			wantNothingWritten(t, e, key)
		}
		// A generate task with a plan is how a delivery is made then.
		wantStatus(t, b.do(t, submitReq("disabled-plan", planBody, asJWT("bob"))), http.StatusAccepted)

		b = setup(t, e, jwtApprovers(t, api.DirectDeliverAnyone))
		v := view(t, b.do(t, submitReq("anyone-bob", deliverBody(directNotify), asJWT("bob"))))
		if v.Provenance == nil || v.Provenance.Type != destination.ProvenanceDirect || v.Provenance.Caller != "jwt:bob" {
			t.Fatalf("Anyone, bob: provenance %+v", v.Provenance)
		}

		b = setup(t, e, jwtApprovers(t, api.DirectDeliverApproversOnly))
		b.h.Approvals = api.ApprovalPolicy{}
		wantStatus(t, b.do(t, submitReq("owner-policy-bob", deliverBody(directNotify), asJWT("bob"))), http.StatusAccepted)
	})
}

func TestParseDirectDeliver(t *testing.T) {
	for in, want := range map[string]api.DirectDeliver{
		"": api.DirectDeliverApproversOnly, " ApproversOnly ": api.DirectDeliverApproversOnly,
		"anyone": api.DirectDeliverAnyone, "Disabled": api.DirectDeliverDisabled,
	} {
		if got, err := api.ParseDirectDeliver(in); err != nil || got != want {
			t.Errorf("ParseDirectDeliver(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"approvers", "true", "Everyone"} {
		if _, err := api.ParseDirectDeliver(in); err == nil || !strings.Contains(err.Error(), "DIRECT_DELIVER") {
			t.Errorf("ParseDirectDeliver(%q) = %v, want an error naming DIRECT_DELIVER", in, err)
		}
	}
}

// EventBridge's detail-type is the destination's configuration: a
// detail_type param — in a direct deliver's input or in a plan entry an
// approval would deliver — is a 400 naming the field and saying why, and
// writes nothing.
func TestEventBridgeDetailTypeParamIsRefused(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		reg, err := deliver.BuildChecker(deliver.Config{EventBridge: &deliver.EventBridgeConfig{
			BusARN: "arn:aws:events:us-east-1:123456789012:event-bus/deliveries", DetailType: "order.approved"}})
		if err != nil {
			t.Fatal(err)
		}
		b := setup(t, e, withHandler(func(h *api.Handler) {
			h.Auth = api.AuthConfig{Mode: api.AuthJWT}
			h.DirectDeliver = api.DirectDeliverAnyone
			h.Destinations = reg
		}))
		direct := deliverBody(`{"destination":"eventbridge","params":{"detail_type":"order.approved"},"payload":{"a":1}}`)
		p := wantProblem(t, b.do(t, submitReq("eb-direct", direct, asJWT("bob"))), http.StatusBadRequest, api.TypeInvalidInput)
		if p.Field != "input.params.detail_type" || !strings.Contains(p.Detail, "configuration") {
			t.Fatalf("direct detail_type: %+v", p)
		}
		plan := `{"kind":"generate","input":{"prompt":"p"},"approval":{"required":true},"deliver":[{"destination":"eventbridge","params":{"detail_type":"order.approved"}}]}`
		p = wantProblem(t, b.do(t, submitReq("eb-plan", plan, asJWT("bob"))), http.StatusBadRequest, api.TypeInvalidBody)
		if p.Field != "deliver[0].params.detail_type" || !strings.Contains(p.Detail, "configuration") {
			t.Fatalf("plan detail_type: %+v", p)
		}
		wantNothingWritten(t, e, "eb-direct")
		wantNothingWritten(t, e, "eb-plan")
		wantStatus(t, b.do(t, submitReq("eb-ok", deliverBody(`{"destination":"eventbridge","params":{},"payload":{"a":1}}`), asJWT("bob"))), http.StatusAccepted)
	})
}
