package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

const ungatedPlan = `{"kind":"generate","input":{"prompt":"summarise"},"deliver":[{"destination":"notify","params":{"to":"requester@example.com"}},{"destination":"crm"}]}`

// A plan that delivers without approval is accepted: the task keeps it
// (part of the payload hash: the same key with another plan is 422), its
// owner sees it, and once the worker completes it with the deliveries the
// view lists them.
func TestPlanWithoutApprovalIsAccepted(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withDestinations(t))
		resp := b.do(t, submitReq("plan-1", ungatedPlan))
		wantStatus(t, resp, http.StatusAccepted)
		v := view(t, resp)
		task, err := b.l.Get(context.Background(), v.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if task.ApprovalRequired || task.Plan != `{"deliver":[{"destination":"notify","params":{"to":"requester@example.com"}},{"destination":"crm","params":{}}]}` {
			t.Fatalf("stored gate %v plan %s", task.ApprovalRequired, task.Plan)
		}
		got := view(t, b.do(t, getReq(v.TaskID)))
		if got.Approval != nil || got.Plan == nil || len(got.Plan.Deliver) != 2 {
			t.Fatalf("view approval %+v plan %+v; want no approval and the plan", got.Approval, got.Plan)
		}
		wantProblem(t, b.do(t, submitReq("plan-1", body("summarise"))), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)

		// The worker's completion, with the follow-ups it computes.
		ctx := context.Background()
		c, err := b.l.Claim(ctx, v.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		fu, err := (*followup.Config)(nil).Completion(c, generated)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Complete(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: generated, FollowUps: fu}); err != nil {
			t.Fatal(err)
		}
		done := view(t, b.do(t, getReq(v.TaskID)))
		if done.State != "completed" || len(done.Deliveries) != 2 || done.Deliveries[0].Destination != "notify" || done.Deliveries[0].State != "queued" {
			t.Fatalf("completed view: state %s deliveries %+v", done.State, done.Deliveries)
		}
	})
}

// With requester email notifications, a submit records the caller's
// verified email claim when the email destination allows the address;
// otherwise — and without such notifications — the task carries none.
func TestSubmitRecordsTheRequesterEmailOnlyWhereItIsMailed(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		reg, err := deliver.BuildChecker(deliver.Config{Email: &deliver.EmailConfig{From: "noreply@example.com", AllowedRecipients: []string{"@example.com"}}})
		if err != nil {
			t.Fatal(err)
		}
		notify, err := followup.Parse(`{"page_origin":"https://tasks.example.com","requester":{"email":true}}`)
		if err != nil {
			t.Fatal(err)
		}
		on := setup(t, e, withHandler(func(h *api.Handler) { h.Destinations, h.Notify = reg, notify }))
		off := setup(t, e, withHandler(func(h *api.Handler) { h.Destinations = reg }))
		cases := []struct {
			b      *bundle
			key    string
			claims map[string]string
			want   string
		}{
			{on, "mail-1", map[string]string{"email": "Alice@Example.com"}, "alice@example.com"},
			{on, "mail-2", map[string]string{"email": "alice@example.com", "email_verified": "false"}, ""},
			{on, "mail-3", map[string]string{"email": "alice@elsewhere.org"}, ""},
			{on, "mail-4", nil, ""},
			{off, "mail-5", map[string]string{"email": "alice@example.com"}, ""},
		}
		for _, c := range cases {
			v := view(t, c.b.do(t, submitReq(c.key, body("x"), withClaims("alice", c.claims))))
			task, err := c.b.l.Get(context.Background(), v.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			if task.RequesterEmail != c.want {
				t.Errorf("%s: recorded %q, want %q", c.key, task.RequesterEmail, c.want)
			}
		}
	})
}

// Without any authorizer (auth mode none: make run without sign-in) the
// one local user's address comes from Requester.AnonymousEmail, checked
// like any other; a caller with a token never gets it.
func TestAnonymousRequesterEmailIsRecordedOnlyWithoutAnAuthorizer(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		reg, err := deliver.BuildChecker(deliver.Config{Email: &deliver.EmailConfig{From: "noreply@example.com", AllowedRecipients: []string{"@example.com"}}})
		if err != nil {
			t.Fatal(err)
		}
		notify, err := followup.Parse(`{"page_origin":"http://127.0.0.1:3000","requester":{"email":true,"anonymous_email":"requester@example.com"}}`)
		if err != nil {
			t.Fatal(err)
		}
		elsewhere, err := followup.Parse(`{"page_origin":"http://127.0.0.1:3000","requester":{"email":true,"anonymous_email":"me@elsewhere.org"}}`)
		if err != nil {
			t.Fatal(err)
		}
		none := func(n *followup.Config) func(h *api.Handler) {
			return func(h *api.Handler) { h.Destinations, h.Notify, h.Auth = reg, n, api.AuthConfig{Mode: "none"} }
		}
		anon, other := setup(t, e, withHandler(none(notify))), setup(t, e, withHandler(none(elsewhere)))
		cases := []struct {
			b    *bundle
			key  string
			req  events.APIGatewayV2HTTPRequest
			want string
		}{
			{anon, "anon-1", submitReq("anon-1", body("x")), "requester@example.com"},
			{anon, "anon-2", submitReq("anon-2", body("x"), withClaims("alice", nil)), ""},
			{other, "anon-3", submitReq("anon-3", body("x")), ""},
		}
		for _, c := range cases {
			v := view(t, c.b.do(t, c.req))
			task, err := c.b.l.Get(context.Background(), v.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			if task.RequesterEmail != c.want {
				t.Errorf("%s: recorded %q, want %q", c.key, task.RequesterEmail, c.want)
			}
		}
	})
}
