package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// listReq is GET /tasks (or /approvals, path) with query as API Gateway
// passes it.
func listReq(path, query string, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	r := newReq(http.MethodGet, path, path, "", "", opts...)
	r.RawQueryString = query
	if q, err := url.ParseQuery(query); err == nil && len(q) > 0 {
		r.QueryStringParameters = map[string]string{}
		for k, v := range q {
			r.QueryStringParameters[k] = strings.Join(v, ",")
		}
	}
	return r
}

func taskList(t *testing.T, resp events.APIGatewayV2HTTPResponse) api.TaskList {
	t.Helper()
	wantStatus(t, resp, http.StatusOK)
	var l api.TaskList
	if err := json.Unmarshal([]byte(resp.Body), &l); err != nil {
		t.Fatalf("task list %q: %v", resp.Body, err)
	}
	return l
}

func approvalList(t *testing.T, resp events.APIGatewayV2HTTPResponse) api.ApprovalList {
	t.Helper()
	wantStatus(t, resp, http.StatusOK)
	var l api.ApprovalList
	if err := json.Unmarshal([]byte(resp.Body), &l); err != nil {
		t.Fatalf("approval list %q: %v", resp.Body, err)
	}
	return l
}

func ids(vs []api.TaskView) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.TaskID
	}
	return out
}

// walk pages through path with query and limit until next_cursor is
// absent, calling between(page) after each page; it returns every task id
// in the order shown.
func walk(t *testing.T, b *bundle, path, query string, as reqOpt, between func(int)) []string {
	t.Helper()
	return walkFrom(t, b, path, query, "", as, between)
}

// walkFrom is walk from cursor.
func walkFrom(t *testing.T, b *bundle, path, query, cursor string, as reqOpt, between func(int)) []string {
	t.Helper()
	var all []string
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatalf("%s?%s: more than 100 pages", path, query)
		}
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		resp := b.do(t, listReq(path, q, as))
		var got []string
		if path == "/approvals" {
			l := approvalList(t, resp)
			got, cursor = ids(l.Approvals), l.NextCursor
		} else {
			l := taskList(t, resp)
			got, cursor = ids(l.Tasks), l.NextCursor
		}
		all = append(all, got...)
		if between != nil {
			between(page)
		}
		if cursor == "" {
			return all
		}
	}
}

// submitAs submits a generate task with key as the caller and returns its id.
func submitAs(t *testing.T, b *bundle, key string, as reqOpt) string {
	t.Helper()
	resp := b.do(t, submitReq(key, body("list "+key), as))
	wantStatus(t, resp, http.StatusAccepted)
	return view(t, resp).TaskID
}

func TestListShowsTheCallersOwnTasksNewestFirst(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now())
		b := setup(t, e, withLedgerClock(clock.Now))
		alice, bob := asJWT("alice"), asJWT("bob")
		var mine []string // oldest first
		for i := range 5 {
			mine = append(mine, submitAs(t, b, fmt.Sprintf("a-%d", i), alice))
			clock.Advance(time.Millisecond)
			submitAs(t, b, fmt.Sprintf("b-%d", i), bob)
			clock.Advance(time.Millisecond)
		}
		newest := slices.Clone(mine)
		slices.Reverse(newest)
		l := taskList(t, b.do(t, listReq("/tasks", "", alice)))
		if !slices.Equal(ids(l.Tasks), newest) || l.NextCursor != "" {
			t.Fatalf("alice's list = %v (next %q), want her 5 tasks newest first %v", ids(l.Tasks), l.NextCursor, newest)
		}
		// A list shows the view without the result: nothing read beyond the items.
		if v := l.Tasks[0]; v.State != "queued" || v.Kind != "generate" || v.CreatedAt == "" || v.Result != nil {
			t.Fatalf("list entry = %+v", v)
		}
		if got := walk(t, b, "/tasks", "limit=2", alice, nil); !slices.Equal(got, newest) {
			t.Fatalf("alice's pages of 2 = %v, want %v", got, newest)
		}
		// The anonymous scope (no authorizer) has no tasks here.
		if l := taskList(t, b.do(t, listReq("/tasks", ""))); len(l.Tasks) != 0 {
			t.Fatalf("the anonymous caller sees %v", ids(l.Tasks))
		}
	})
}

// A walk while tasks are created: every task that existed when it began
// appears exactly once, in order; the new ones come on a new walk's first
// page, never in the middle.
func TestListPagesHaveNoGapsOrDuplicatesWhileTasksAreCreated(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now())
		b := setup(t, e, withLedgerClock(clock.Now))
		alice := asJWT("alice")
		var before []string
		for i := range 7 {
			before = append(before, submitAs(t, b, fmt.Sprintf("k-%d", i), alice))
			clock.Advance(time.Millisecond)
		}
		slices.Reverse(before)
		var added []string
		got := walk(t, b, "/tasks", "limit=3", alice, func(page int) {
			added = append(added, submitAs(t, b, fmt.Sprintf("during-%d", page), alice))
			clock.Advance(time.Millisecond)
		})
		if !slices.Equal(got, before) {
			t.Fatalf("walk while creating = %v, want exactly the tasks before it %v", got, before)
		}
		first := taskList(t, b.do(t, listReq("/tasks", "limit=3", alice)))
		slices.Reverse(added)
		if !slices.Equal(ids(first.Tasks), added[:3]) {
			t.Fatalf("a new walk's first page = %v, want the newest %v", ids(first.Tasks), added[:3])
		}
	})
}

func TestListFiltersByStateAndKind(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now())
		b := setup(t, e, withLedgerClock(clock.Now))
		alice := asJWT("alice")
		var queued, cancelled []string
		for i := range 8 {
			id := submitAs(t, b, fmt.Sprintf("f-%d", i), alice)
			clock.Advance(time.Millisecond)
			if i%3 == 1 {
				wantStatus(t, b.do(t, cancelReq(id, alice)), http.StatusOK)
				cancelled = append([]string{id}, cancelled...)
			} else {
				queued = append([]string{id}, queued...)
			}
		}
		// A deliver task of hers (as an approval makes them).
		d, err := b.l.Create(context.Background(), ledger.NewTask{Scope: "jwt:alice", IdempotencyKey: "deliver-1", Kind: ledger.KindDeliver,
			Input: `{"destination":"notify","params":{},"payload":{}}`, PayloadSHA256: "d1"})
		if err != nil {
			t.Fatal(err)
		}
		// Bob's cancelled task is never hers.
		wantStatus(t, b.do(t, cancelReq(submitAs(t, b, "bob-1", asJWT("bob")), asJWT("bob"))), http.StatusOK)

		// A filter that drops most entries still pages without gaps: a
		// page of one cancelled task continues past the queued ones.
		if got := walk(t, b, "/tasks", "state=cancelled&limit=1", alice, nil); !slices.Equal(got, cancelled) {
			t.Fatalf("state=cancelled = %v, want %v", got, cancelled)
		}
		wantQueued := append([]string{d.TaskID}, queued...)
		if got := walk(t, b, "/tasks", "state=queued&limit=2", alice, nil); !slices.Equal(got, wantQueued) {
			t.Fatalf("state=queued = %v, want %v", got, wantQueued)
		}
		if got := walk(t, b, "/tasks", "state=queued,cancelled", alice, nil); len(got) != 9 {
			t.Fatalf("state=queued,cancelled = %v, want all 9", got)
		}
		if got := walk(t, b, "/tasks", "kind=deliver", alice, nil); !slices.Equal(got, []string{d.TaskID}) {
			t.Fatalf("kind=deliver = %v, want %v", got, d.TaskID)
		}
		if got := walk(t, b, "/tasks", "kind=generate&state=queued&limit=1", alice, nil); !slices.Equal(got, queued) {
			t.Fatalf("kind=generate&state=queued = %v, want %v", got, queued)
		}
		if got := walk(t, b, "/tasks", "state=completed", alice, nil); len(got) != 0 {
			t.Fatalf("state=completed = %v, want none", got)
		}
	})
}

// A cursor continues only the list and caller it was given to: another
// caller's, an altered one or a forged one is a 400 that reads nothing
// of anyone's.
func TestListCursorOfAnotherCallerOrForgedIsRefused(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now())
		b := setup(t, e, withLedgerClock(clock.Now))
		alice, bob := asJWT("alice"), asJWT("bob")
		for i := range 3 {
			submitAs(t, b, fmt.Sprintf("a-%d", i), alice)
			submitAs(t, b, fmt.Sprintf("b-%d", i), bob)
			clock.Advance(time.Millisecond)
		}
		bobs := taskList(t, b.do(t, listReq("/tasks", "limit=1", bob)))
		if bobs.NextCursor == "" {
			t.Fatal("bob's first page of 1 has no next_cursor")
		}
		payload, mac, ok := strings.Cut(bobs.NextCursor, ".")
		if !ok {
			t.Fatalf("cursor %q has no MAC part", bobs.NextCursor)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(payload)
		// Its position, moved past every task (a forged position), with
		// bob's MAC; and a cursor of the list's shape with a made-up MAC.
		moved := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"a":"`, `"a":"9`, 1))) + "." + mac
		forged := base64.RawURLEncoding.EncodeToString([]byte(`{"a":"9999999999999#t_zzzzzzzzzzzzzzzzzzzzzzzzzz"}`)) + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 16))
		for name, c := range map[string]string{"bob's cursor": bobs.NextCursor, "moved": moved, "forged": forged, "not base64": "!!!", "no mac": payload} {
			p := wantProblem(t, b.do(t, listReq("/tasks", "cursor="+url.QueryEscape(c), alice)), http.StatusBadRequest, api.TypeInvalidQuery)
			if p.Field != "cursor" {
				t.Errorf("%s: problem field %q, want cursor", name, p.Field)
			}
		}
		// Bob's approvals cursor does not continue bob's task list either.
		wantProblem(t, b.do(t, listReq("/approvals", "cursor="+url.QueryEscape(bobs.NextCursor), bob)), http.StatusBadRequest, api.TypeInvalidQuery)
		// Bob's own cursor continues his list, and only his.
		rest := walkFrom(t, b, "/tasks", "limit=1", bobs.NextCursor, bob, nil)
		all := append(ids(bobs.Tasks), rest...)
		for _, id := range all {
			task, err := b.l.Get(context.Background(), id)
			if err != nil || task.Scope != "jwt:bob" {
				t.Fatalf("bob's walk shows %s (%v, %v)", id, task, err)
			}
		}
		if len(all) != 3 {
			t.Fatalf("bob's walk = %v, want his 3 tasks", all)
		}
	})
}

func TestListBadParametersAre400AndWriteNothing(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		submitAs(t, b, "only", asJWT("alice"))
		before := scanTasks(t, e)
		for _, c := range []struct{ path, query, field string }{
			{"/tasks", "limit=0", "limit"},
			{"/tasks", "limit=101", "limit"},
			{"/tasks", "limit=ten", "limit"},
			{"/tasks", "limit=1&limit=2", "limit"},
			{"/tasks", "state=done", "state"},
			{"/tasks", "state=queued,", "state"},
			{"/tasks", "kind=summarise", "kind"},
			{"/tasks", "owner=jwt:bob", "owner"},
			{"/tasks", "cursor=", "cursor"},
			{"/approvals", "limit=500", "limit"},
			{"/approvals", "state=queued", "state"},
			{"/approvals", "cursor=abc.def", "cursor"},
		} {
			p := wantProblem(t, b.do(t, listReq(c.path, c.query, asJWT("alice"))), http.StatusBadRequest, api.TypeInvalidQuery)
			if p.Field != c.field {
				t.Errorf("%s?%s: field %q, want %q (%s)", c.path, c.query, p.Field, c.field, p.Detail)
			}
		}
		if after := scanTasks(t, e); len(after) != len(before) {
			t.Fatalf("bad list requests changed the table: %d items, then %d", len(before), len(after))
		}
		// limit bounds: 1 and 100 are accepted.
		wantStatus(t, b.do(t, listReq("/tasks", "limit=1", asJWT("alice"))), http.StatusOK)
		wantStatus(t, b.do(t, listReq("/tasks", "limit=100", asJWT("alice"))), http.StatusOK)
	})
}

// gatedAs submits a gated task as the caller with an approval window of
// ttl seconds and completes it into awaiting_approval.
func gatedAs(t *testing.T, b *bundle, key string, ttl int, as reqOpt) string {
	t.Helper()
	body := strings.Replace(planBody, `"expires_in_seconds":3600`, fmt.Sprintf(`"expires_in_seconds":%d`, ttl), 1)
	resp := b.do(t, submitReq(key, body, as))
	wantStatus(t, resp, http.StatusAccepted)
	id := view(t, resp).TaskID
	generateAs(t, b, id)
	return id
}

// With an approver claim: an approver sees exactly the tasks they may
// decide (every gated task awaiting approval, less their own when
// self-approval is off), oldest deadline first, each with its deadline,
// result and plan; a non-approver sees none, not even their own.
func TestApprovalsListsWhatTheCallerMayDecideOldestFirst(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withHandler(func(h *api.Handler) {
			h.Auth = api.AuthConfig{Mode: api.AuthJWT}
			h.Approvals = api.ApprovalPolicy{Claim: "cognito:groups", Value: "approvers", NoSelfApproval: true}
		}))
		approver := map[string]string{"cognito:groups": "[staff approvers]"}
		carol, dave := withClaims("carol", approver), withClaims("dave", approver)
		bob := asJWT("bob")
		late := gatedAs(t, b, "late", 3600, bob)
		early := gatedAs(t, b, "early", 600, bob)
		middle := gatedAs(t, b, "middle", 1800, bob)
		carols := gatedAs(t, b, "carols", 900, carol)
		// Not awaiting a decision: gated but not generated yet; ungated.
		wantStatus(t, b.do(t, submitReq("pending", planBody, bob)), http.StatusAccepted)
		submitAs(t, b, "plain", bob)

		l := approvalList(t, b.do(t, listReq("/approvals", "", carol)))
		if want := []string{early, middle, late}; !slices.Equal(ids(l.Approvals), want) || l.NextCursor != "" {
			t.Fatalf("carol's approvals = %v (next %q), want %v (not her own)", ids(l.Approvals), l.NextCursor, want)
		}
		for _, v := range l.Approvals {
			if v.State != string(ledger.StateAwaitingApproval) || v.Approval == nil || v.Approval.ExpiresAt == "" ||
				v.Plan == nil || len(v.Plan.Deliver) != 2 || v.Plan.Deliver[0].Destination != "notify" ||
				string(v.Result) != generated || v.ResultSHA256 != ledger.SHA256Hex(generated) {
				t.Fatalf("approval entry = %+v", v)
			}
		}
		if got := walk(t, b, "/approvals", "limit=1", dave, nil); !slices.Equal(got, []string{early, carols, middle, late}) {
			t.Fatalf("dave's approvals, a page at a time = %v, want %v", got, []string{early, carols, middle, late})
		}
		// Bob is no approver: nothing, not even his own.
		if l := approvalList(t, b.do(t, listReq("/approvals", "", bob))); len(l.Approvals) != 0 || l.NextCursor != "" {
			t.Fatalf("bob (no approver) sees %v", ids(l.Approvals))
		}
		// Decided tasks leave the list.
		approve := `{"artifact_sha256":"` + ledger.SHA256Hex(generated) + `"}`
		wantStatus(t, b.do(t, decisionReq("approve", early, approve, carol)), http.StatusOK)
		wantStatus(t, b.do(t, decisionReq("reject", middle, "", carol)), http.StatusOK)
		if got := walk(t, b, "/approvals", "limit=2", dave, nil); !slices.Equal(got, []string{carols, late}) {
			t.Fatalf("after two decisions dave sees %v, want %v", got, []string{carols, late})
		}
	})
}

// Without an approver claim only a task's owner decides: each caller's
// inbox holds their own tasks awaiting approval and nobody else's.
func TestApprovalsWithoutAClaimAreTheOwnersOnly(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		alice, bob := asJWT("alice"), asJWT("bob")
		var bobs []string
		for i := range 3 {
			gatedAs(t, b, fmt.Sprintf("a-%d", i), 600+i, alice)
			bobs = append(bobs, gatedAs(t, b, fmt.Sprintf("b-%d", i), 900+i, bob))
		}
		if got := walk(t, b, "/approvals", "limit=1", bob, nil); !slices.Equal(got, bobs) {
			t.Fatalf("bob's approvals = %v, want his own %v", got, bobs)
		}
		l := approvalList(t, b.do(t, listReq("/approvals", "limit=2", alice)))
		if len(l.Approvals) != 2 || l.NextCursor == "" {
			t.Fatalf("alice's first page = %v next %q", ids(l.Approvals), l.NextCursor)
		}
		// Alice's cursor is hers: bob cannot continue it.
		wantProblem(t, b.do(t, listReq("/approvals", "cursor="+url.QueryEscape(l.NextCursor), bob)), http.StatusBadRequest, api.TypeInvalidQuery)
	})
}

// A list entry carries the task view's progress (the page shows its
// summary in every row), computed from the item already read: the same
// summary GET /tasks/{id} gives.
func TestListEntriesCarryTheTaskViewsProgress(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		// A millisecond apart: the list is newest first by creation time.
		clock := testenv.NewClock(time.Now())
		b := setup(t, e, withLedgerClock(clock.Now))
		alice := asJWT("alice")
		queued := submitAs(t, b, "p-queued", alice)
		clock.Advance(time.Millisecond)
		cancelled := submitAs(t, b, "p-cancelled", alice)
		wantStatus(t, b.do(t, cancelReq(cancelled, alice)), http.StatusOK)
		clock.Advance(time.Millisecond)
		gated := gatedAs(t, b, "p-gated", 3600, alice)
		l := taskList(t, b.do(t, listReq("/tasks", "", alice)))
		a := approvalList(t, b.do(t, listReq("/approvals", "", alice)))
		if len(a.Approvals) != 1 || a.Approvals[0].TaskID != gated {
			t.Fatalf("approvals = %v, want [%s]", ids(a.Approvals), gated)
		}
		for _, v := range append(l.Tasks, a.Approvals...) {
			one := view(t, b.do(t, getReq(v.TaskID, alice)))
			if v.Progress == nil || one.Progress == nil || v.Progress.Summary != one.Progress.Summary || v.Progress.MaxAttempts != one.Progress.MaxAttempts {
				t.Errorf("list entry %s progress %+v, want the task view's %+v", v.TaskID, v.Progress, one.Progress)
			}
		}
		if len(l.Tasks) != 3 || l.Tasks[2].TaskID != queued {
			t.Fatalf("list = %v", ids(l.Tasks))
		}
	})
}
