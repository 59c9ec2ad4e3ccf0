package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// List pages: DefaultListLimit tasks unless the request's limit says
// otherwise, at most tasklist.MaxListLimit.
const DefaultListLimit = 20

// TypeInvalidQuery: a query parameter the list does not take, or a value
// it cannot use (a limit out of range, a state or kind that does not
// exist, a cursor this list did not give this caller). 400.
const TypeInvalidQuery = ProblemBase + "invalid-query"

// TaskList is GET /tasks's answer: the caller's tasks, newest first, and
// the cursor of the next page (absent on the last).
type TaskList struct {
	Tasks      []TaskView `json:"tasks"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// ApprovalList is GET /approvals's answer: the tasks awaiting a decision
// the caller may make, oldest deadline first, each with its result, its
// approval (expires_at: the deadline) and its plan.
type ApprovalList struct {
	Approvals  []TaskView `json:"approvals"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// listParams are a list request's validated query parameters.
type listParams struct {
	limit  int
	cursor string
	states []ledger.State
	kind   string
}

// parseListQuery validates the query string against the parameters a
// list takes (allowed): every other parameter, a repeated one, or a
// value out of range is a 400 naming it.
func parseListQuery(req *events.APIGatewayV2HTTPRequest, allowed ...string) (listParams, *Problem) {
	p := listParams{limit: DefaultListLimit}
	q := url.Values{}
	if req.RawQueryString != "" {
		var err error
		if q, err = url.ParseQuery(req.RawQueryString); err != nil {
			return p, invalidQuery("", "The query string is not valid URL encoding.")
		}
	} else {
		for k, v := range req.QueryStringParameters {
			q[k] = strings.Split(v, ",")
		}
	}
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !contains(allowed, k) {
			return p, invalidQuery(clip(k, 32), fmt.Sprintf("Unknown query parameter %q; this list takes %s.", clip(k, 32), strings.Join(allowed, ", ")))
		}
		vs := q[k]
		if k != "state" && len(vs) != 1 {
			return p, invalidQuery(k, fmt.Sprintf("Give %q once.", k))
		}
		switch k {
		case "limit":
			n, err := strconv.Atoi(vs[0])
			if err != nil || n < 1 || n > tasklist.MaxListLimit {
				return p, invalidQuery(k, fmt.Sprintf("limit must be a whole number from 1 to %d (default %d).", tasklist.MaxListLimit, DefaultListLimit))
			}
			p.limit = n
		case "cursor":
			if vs[0] == "" || len(vs[0]) > tasklist.MaxCursorBytes {
				return p, badCursor()
			}
			p.cursor = vs[0]
		case "kind":
			if vs[0] != contract.KindGenerate && vs[0] != ledger.KindDeliver {
				return p, invalidQuery(k, fmt.Sprintf("kind must be %s or %s.", contract.KindGenerate, ledger.KindDeliver))
			}
			p.kind = vs[0]
		case "state":
			for _, v := range vs {
				for s := range strings.SplitSeq(v, ",") {
					if !ledger.State(s).Valid() {
						return p, invalidQuery(k, fmt.Sprintf("state %q is not a task state; give one or more of queued, running, retry_wait, unknown, awaiting_approval, completed, failed, cancelled, rejected, needs_review (comma-separated).", clip(s, 32)))
					}
					if !contains(p.states, ledger.State(s)) {
						p.states = append(p.states, ledger.State(s))
					}
				}
			}
		}
	}
	return p, nil
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func invalidQuery(field, detail string) *Problem {
	return newProblem(TypeInvalidQuery, http.StatusBadRequest, "Invalid query parameter", detail).withField(field)
}

func badCursor() *Problem {
	return invalidQuery("cursor", "cursor is not one this list gave you: pass next_cursor from the previous page unchanged, or leave it out for the first page.")
}

// listProblem maps a list's ledger error: a cursor it refused is 400.
func (h *Handler) listProblem(ctx context.Context, c *call, op string, err error) *Problem {
	if errors.Is(err, tasklist.ErrBadCursor) {
		return badCursor()
	}
	return h.storeProblem(ctx, c, op, err)
}

// listTasks serves GET /tasks: the caller's own tasks (their scope),
// newest first, filtered by state and kind.
func (h *Handler) listTasks(ctx context.Context, c *call) events.APIGatewayV2HTTPResponse {
	p, prob := parseListQuery(c.req, "cursor", "kind", "limit", "state")
	if prob != nil {
		return h.reject(c, prob)
	}
	page, err := tasklist.New(h.Ledger).ListByOwner(ctx, tasklist.OwnerQuery{Scope: c.scope, Kind: p.kind, States: p.states, Limit: p.limit, Cursor: p.cursor})
	if err != nil {
		return h.reject(c, h.listProblem(ctx, c, "list", err))
	}
	out := TaskList{Tasks: make([]TaskView, 0, len(page.Tasks)), NextCursor: page.Next}
	now := h.now()
	for _, t := range page.Tasks {
		out.Tasks = append(out.Tasks, listView(t, now))
	}
	c.outcome = "listed"
	return jsonResponse(http.StatusOK, out)
}

// listApprovals serves GET /approvals: the tasks awaiting approval the
// caller may decide (mayDecide), oldest deadline first, each with its
// plan. A caller the policy lets decide nothing gets an empty list, and
// nothing is read.
func (h *Handler) listApprovals(ctx context.Context, c *call) events.APIGatewayV2HTTPResponse {
	p, prob := parseListQuery(c.req, "cursor", "limit")
	if prob != nil {
		return h.reject(c, prob)
	}
	q := tasklist.InboxQuery{Viewer: c.scope, Limit: p.limit, Cursor: p.cursor}
	if h.Approvals.Claim == "" || h.Approvals.approver(c.req.RequestContext) {
		q.Keep = func(t *ledger.Task) bool { return t.ApprovalRequired && h.mayDecide(c, t) }
	}
	page, err := tasklist.New(h.Ledger).ListAwaitingApproval(ctx, q)
	if err != nil {
		return h.reject(c, h.listProblem(ctx, c, "list approvals", err))
	}
	out := ApprovalList{Approvals: make([]TaskView, 0, len(page.Tasks)), NextCursor: page.Next}
	now := h.now()
	for _, t := range page.Tasks {
		v := listView(t, now)
		if showsResult(t) && t.Result != "" {
			v.Result = NewTaskView(t, nil).Result
		}
		v.Plan = h.planView(ctx, t)
		out.Approvals = append(out.Approvals, v)
	}
	c.outcome = "listed"
	return jsonResponse(http.StatusOK, out)
}

// listView is a task as a list shows it at now: its view without the
// result (result_sha256 says which; receipt.result_bytes its size when
// kept in S3), the deliveries, budget and usage — GET /tasks/{id} has
// those — so a page costs no read beyond the task items. Its progress is
// the task view's, less the tokens (read from the result).
func listView(t *ledger.Task, now time.Time) TaskView {
	v := NewTaskView(t, nil)
	v.Progress = progressOf(t, now, nil)
	v.Result = nil
	if showsResult(t) {
		v.ResultSHA256 = t.ResultSHA256
		if t.ResultRef != nil && t.Result == "" {
			v.Receipt.ResultBytes, v.Receipt.ResultSHA256 = t.ResultRef.Size, t.ResultRef.SHA256
		}
	}
	v.GeneratedSHA256 = t.GeneratedSHA256
	v.Approval = approvalView(t)
	return v
}

func jsonResponse(status int, v any) events.APIGatewayV2HTTPResponse {
	body, err := json.Marshal(v)
	if err != nil {
		return internalError().response()
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Body: string(body), Headers: map[string]string{
		"Content-Type":           "application/json",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	}}
}
