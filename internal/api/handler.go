package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// SendTimeout bounds the outbox SQS send after a task is recorded; past it
// the request still answers 202 and the reconciler re-sends.
const SendTimeout = 3 * time.Second

// Dispatcher sends the SQS message that wakes a worker for a task;
// *dispatch.Sender implements it.
type Dispatcher interface {
	Send(ctx context.Context, taskID, correlationID string, delay time.Duration) error
}

// Handler serves the HTTP API. Its zero limits mean MaxBody and MaxInput.
// Safe for concurrent use.
type Handler struct {
	Ledger   *ledger.Ledger
	Dispatch Dispatcher
	Log      *slog.Logger
	// Metrics receives EMF records (nil: none).
	Metrics *metrics.Writer
	// AllowedOrigins is the CORS allow-list (see ParseOrigins); empty
	// disables CORS.
	AllowedOrigins []string
	// Auth is what GET /auth/config tells the page about sign-in; with jwt
	// or iam a /tasks request without an authorizer context is refused.
	Auth AuthConfig
	// Approvals says who may approve, reject or withdraw (see
	// ApprovalPolicy; the zero value: only the task's owner).
	Approvals ApprovalPolicy
	// DirectDeliver says who may submit a deliver task directly
	// (directdeliver.go; the zero value: ApproversOnly).
	DirectDeliver DirectDeliver
	MaxBody       int
	MaxInput      int
	// Budgets reads the spend of budgeted tasks for their view and extends
	// a chain's budget item at a regenerate; Quotas is
	// the per-caller daily quota checked before a submit (nil: none). See
	// spend.go.
	Budgets *spend.Accountant
	Quotas  *spend.Quotas
	// Payloads is the S3 claim-check store (DESIGN §12): inputs above its
	// inline threshold go to S3 and the item keeps the reference. nil keeps
	// every input inline (no S3 call at all).
	Payloads *payload.Store
	// Destinations are the configured destinations a deliver task may
	// name (deliver.go); nil: deliver submits are refused.
	Destinations *deliver.Registry
	// Notify is who is notified of what (followup.Config; nil: nobody):
	// with requester email, a submit records the caller's address.
	Notify *followup.Config
	// Provider is what the submit knows of the worker's provider: a
	// generate task it could never run (documents it does not accept, a
	// call bound above the model's tokens_per_minute) is refused with 422
	// before anything is written (providercheck.go). nil: no such check.
	Provider *ProviderProfile
	// Now is the clock for request timing (default time.Now).
	Now func() time.Time
}

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return logging.Discard()
	}
	return h.Log
}

func (h *Handler) now() time.Time {
	if h.Now == nil {
		return time.Now()
	}
	return h.Now()
}

func (h *Handler) limits() limits {
	l := limits{body: h.MaxBody, input: h.MaxInput}
	if l.body <= 0 {
		l.body = MaxBody
	}
	if l.input <= 0 {
		l.input = MaxInput
	}
	return l
}

// call is one request on its way through the handler.
type call struct {
	req     *events.APIGatewayV2HTTPRequest
	headers map[string]string
	route   route
	scope   string
	// taskID and outcome are logged when the request ends.
	taskID  string
	outcome string
	// recorded is the caller's task under the request's key when a check
	// before Create looked it up and found it (recorded): the request is
	// then answered from it — 200 replay or 422 reuse — and nothing is
	// written on the way (no document adopted, no input placed).
	recorded *ledger.Task
}

// Handle serves one API Gateway HTTP API (payload 2.0) request. It never
// returns an error: every failure is a problem+json response.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, _ error) {
	start := h.now()
	c := &call{req: &req, headers: lowerHeaders(req.Headers)}
	method := requestMethod(&req)
	defer func() {
		if v := recover(); v != nil {
			h.log().ErrorContext(ctx, "api: panic serving request", "method", method, "route", c.route.id.template(), "panic_type", fmt.Sprintf("%T", v))
			resp = internalError().response()
		}
		h.applyCORS(c.headers, &resp)
		attrs := []any{"method", method, "route", c.route.id.template(), "status", resp.StatusCode,
			"duration_ms", h.now().Sub(start).Milliseconds()}
		if c.taskID != "" {
			attrs = append(attrs, "task_id", c.taskID)
		}
		if c.outcome != "" {
			attrs = append(attrs, "outcome", c.outcome)
		}
		h.log().InfoContext(ctx, "api: request", attrs...)
	}()

	rt, ok := matchRoute(&req)
	if !ok {
		if resp, served := h.servePublic(&req, method); served {
			c.outcome = "public"
			return resp, nil
		}
		c.outcome = "no_route"
		return newProblem(TypeNotFound, http.StatusNotFound, "Not found", "No such resource.").response(), nil
	}
	c.route = rt
	if method == http.MethodOptions {
		return h.preflight(c.headers, rt), nil
	}
	if r, ok := rt.forMethod(method); ok {
		rt, c.route = r, r
	}
	if !rt.allows(method) {
		p := newProblem(TypeMethodNotAllowed, http.StatusMethodNotAllowed, "Method not allowed",
			fmt.Sprintf("%s is not supported on %s.", clip(method, 16), rt.id.template()))
		p.allow = rt.allowed()
		return p.response(), nil
	}
	scope, err := CallerScope(req.RequestContext)
	if err != nil {
		c.outcome = "no_identity"
		return newProblem(TypeUnauthenticated, http.StatusUnauthorized, "Unauthenticated", noIdentityDetail(err)).response(), nil
	}
	if scope == Anonymous && h.Auth.requiresIdentity() {
		c.outcome = "no_authorizer"
		h.log().WarnContext(ctx, "api: request without an authorizer context while AUTH_MODE requires one; is a route missing its authorizer?",
			"auth_mode", h.Auth.Mode, "route", rt.id.template())
		return newProblem(TypeUnauthenticated, http.StatusUnauthorized, "Unauthenticated",
			"This API requires an authorizer ("+h.Auth.Mode+"), and the request came without one.").response(), nil
	}
	c.scope = scope
	switch rt.id {
	case routeTasks:
		return h.submit(ctx, c), nil
	case routeTask:
		return h.get(ctx, c), nil
	case routeRegenerate:
		return h.regenerate(ctx, c), nil
	case routeCancel:
		return h.cancel(ctx, c), nil
	case routeApprove, routeReject, routeWithdraw:
		return h.decide(ctx, c), nil
	case routeUploads:
		return h.presign(ctx, c), nil // uploads.go
	case routeConversation:
		return h.conversation(ctx, c), nil // conversation.go
	case routeListTasks:
		return h.listTasks(ctx, c), nil // list.go
	case routeApprovals:
		return h.listApprovals(ctx, c), nil
	}
	return internalError().response(), nil
}

func (h *Handler) body(c *call) ([]byte, *Problem) {
	return decodeBody(c.req.Body, c.req.IsBase64Encoded, h.limits().body)
}

func (h *Handler) submit(ctx context.Context, c *call) events.APIGatewayV2HTTPResponse {
	body, p := h.body(c)
	if p != nil {
		return h.reject(c, p)
	}
	s, p := parseSubmit(c.headers, body, h.limits())
	if p == nil && s.kind == deliver.Kind {
		// A retry of a delivery already recorded under the key answers its
		// task, whatever the permission or the destinations say now: a 403
		// or 400 would tell a client whose first reply was lost that
		// nothing was written, and it might deliver another way.
		if p = h.mayDeliverDirectly(c); p == nil { // directdeliver.go
			p = h.checkDeliver(s.input)
		}
		p = h.refuse(ctx, c, s.key, c.outcome, p)
	}
	if p == nil {
		p = h.checkPlan(s.plan)
	}
	if p == nil && !s.plan.required && len(s.plan.deliveries) > 0 {
		// A plan without an approval gate delivers with no approver in
		// between: a direct delivery, under the same permission (and a
		// retry of a recorded task is answered with it, as above).
		p = h.refuse(ctx, c, s.key, c.outcome, h.mayDeliverDirectly(c))
	}
	if p != nil {
		return h.reject(c, p)
	}
	if p := h.overQuota(ctx, c, s.key, h.quotaWant(s.kind, s.input)); p != nil {
		return h.reject(c, p)
	}
	// A generate task the worker's provider could never run is refused:
	// documents it does not take before the uploads are even resolved; a
	// call bound above its model's tokens_per_minute, like a token budget
	// that cannot cover one call, once the documents' bounds are known
	// (resolved, before anything is copied or written).
	if s.kind == contract.KindGenerate {
		p = h.refuseDocuments(ctx, c, s.key, len(s.documents)) // providercheck.go
		if p == nil && len(s.documents) == 0 {
			p = h.refuseOverAdmission(ctx, c, s.key, s.input, nil)
		}
		if p != nil {
			return h.reject(c, p)
		}
	}
	docs, p := h.resolveDocuments(ctx, c, s.key, s.documents, func(docs []ledger.DocumentRef) *Problem { // documents.go
		if s.budget.present() {
			if p := budgetCoversOneCall(s.budget, json.RawMessage(s.input), docs...); p != nil {
				return p
			}
		}
		return h.refuseOverAdmission(ctx, c, s.key, s.input, docs)
	})
	if p != nil {
		return h.reject(c, p)
	}
	return h.create(ctx, c, withBudget(ledger.NewTask{
		Scope:          c.scope,
		IdempotencyKey: s.key,
		Kind:           s.kind,
		Input:          s.input,
		Documents:      docs,
		PayloadSHA256:  withDocuments(submitHash(s.kind, s.input, s.budget, s.plan.canonical()), docs),
		CorrelationID:  s.correlationID,
		Plan:           s.plan.canonical(),
		ApprovalTTL:    s.plan.ttl(),
		Provenance:     directProvenance(s.kind, c.scope),
		ConversationID: conversationIDOf(s.kind, s.input),      // conversation.go
		RequesterEmail: h.requesterEmail(c.req.RequestContext), // notify.go
	}, s.budget))
}

func (h *Handler) regenerate(ctx context.Context, c *call) events.APIGatewayV2HTTPResponse {
	body, p := h.body(c)
	if p != nil {
		return h.reject(c, p)
	}
	s, p := parseRegenerate(c.headers, body, h.limits())
	if p != nil {
		return h.reject(c, p)
	}
	if p := h.overQuota(ctx, c, s.key, 0); p != nil {
		return h.reject(c, p)
	}
	parent, p := h.visible(ctx, c)
	if p != nil && p.Type == TypeNotFound && ledger.ValidTaskID(c.route.taskID) {
		if resp, done := h.replayOrphan(ctx, c, s); done {
			return resp
		}
	}
	// A task already recorded under the key (a retry of this regenerate,
	// maybe after a lost reply, or a reuse of the key) is answered by
	// Create — 200 replay or 422 — and nothing before it may refuse it
	// or write: not the parent's retention, the refusals, the documents'
	// renewal, the budget's extension (adversarial review: a retry after
	// the parent's window got 404 though its task existed, and a key
	// reuse moved the chain budget's expiry before its 422). The lookup (one
	// consistent GetItem) is made only where something before Create could
	// answer otherwise or write: a parent past its retention, inherited
	// documents to renew, a chain budget to extend; the refusals look the
	// key up themselves, only when they refuse.
	var recorded bool
	if p == nil && (parent.PastRetention(h.now()) || len(parent.Documents) > 0 || (h.Budgets != nil && parent.HasBudget())) {
		recorded, p = h.recorded(ctx, c, s.key)
	}
	if p == nil && !recorded && parent.PastRetention(h.now()) {
		// Its retention window ended; TTL deletes it (days later, maybe):
		// gone, as for Create. Its chain's budget item is only kept for
		// the window (spend.DefaultRetention), so a regenerate now could
		// find the chain's spend forgotten.
		p = notFound()
	}
	if p == nil && parent.Kind == deliver.Kind {
		p = regenerateDeliver(parent.TaskID)
	}
	if p != nil {
		return h.reject(c, p)
	}
	input := s.input
	if input == "" {
		parentInput, p := h.inputOf(ctx, c, parent)
		if p != nil {
			return h.reject(c, p)
		}
		canon, err := CanonicalJSON([]byte(parentInput))
		if err != nil {
			h.log().ErrorContext(ctx, "api: parent input is not JSON", "task_id", parent.TaskID, "input_bytes", len(parentInput))
			return h.reject(c, internalError())
		}
		input = string(canon)
	}
	if p := regenerateConversation(parent, s.input); p != nil { // conversation.go
		return h.reject(c, p)
	}
	pl, err := storedPlan(parent)
	if err != nil {
		h.log().ErrorContext(ctx, "api: parent plan is not JSON", "task_id", parent.TaskID, "plan_bytes", len(parent.Plan))
		return h.reject(c, internalError())
	}
	n := inheritBudget(ledger.NewTask{
		Scope:          c.scope,
		IdempotencyKey: s.key,
		Kind:           parent.Kind,
		Input:          input,
		Documents:      parent.Documents,
		PayloadSHA256:  withDocuments(payloadHashPlan(parent.Kind, input, parent.TaskID, pl.canonical()), parent.Documents),
		ParentTaskID:   parent.TaskID,
		InputInherited: aws.Bool(s.input == ""),
		CorrelationID:  s.correlationID,
		Plan:           pl.canonical(),
		ApprovalTTL:    pl.ttl(),
		ConversationID: parent.ConversationID,
		RequesterEmail: h.requesterEmail(c.req.RequestContext),
	}, parent)
	if recorded {
		return h.create(ctx, c, n)
	}
	// The chain's token budget is inherited: a regenerate whose input and
	// inherited documents could never fit one call under it is refused like such a submit,
	// before anything is written.
	if parent.BudgetMaxTokens > 0 {
		if p := budgetCoversOneCall(&budgetSpec{tokens: parent.BudgetMaxTokens}, json.RawMessage(input), parent.Documents...); p != nil {
			return h.reject(c, p)
		}
	}
	// So is one the worker's provider could never run (the inherited
	// documents, the call bound), before the documents are renewed.
	if parent.Kind == contract.KindGenerate {
		p := h.refuseDocuments(ctx, c, s.key, len(parent.Documents))
		if p == nil {
			p = h.refuseOverAdmission(ctx, c, s.key, input, parent.Documents)
		}
		if p != nil {
			return h.reject(c, p)
		}
	}
	// Inherited documents must still be there, and live on with the child.
	if p := h.renewInherited(ctx, c, s.key, parent.Documents); p != nil {
		return h.reject(c, p)
	}
	// The chain gains a task: its budget item must outlive it too.
	if p := h.extendChainBudget(ctx, c, parent); p != nil {
		return h.reject(c, p)
	}
	return h.create(ctx, c, n)
}

// replayed answers a request recorded before as t: 200, the task's view.
func (h *Handler) replayed(ctx context.Context, c *call, t *ledger.Task) events.APIGatewayV2HTTPResponse {
	c.outcome = "replayed"
	h.count(ctx, t.TaskID, "TaskReplayed")
	return h.taskResponse(ctx, c, http.StatusOK, t, map[string]string{
		"Location":               c.route.prefix + "/tasks/" + t.TaskID,
		HeaderIdempotentReplayed: "true",
	})
}

// keyReused answers a request whose key names taskID, recorded with
// another payload: 422, nothing written.
func (h *Handler) keyReused(ctx context.Context, c *call, taskID string) events.APIGatewayV2HTTPResponse {
	c.outcome = "key_reused"
	h.count(ctx, taskID, "IdempotencyKeyReused")
	// No task id or state: without an authorizer every caller shares
	// the Anonymous scope, and the task belongs to whoever used the key
	// first. The caller who did already has its id (the 202's Location).
	return newProblem(TypeIdempotencyKeyReused, http.StatusUnprocessableEntity, "Idempotency-Key reused",
		"This Idempotency-Key was already used with a different request payload; nothing was written. Use a new key for a new request.").
		withField("Idempotency-Key").response()
}

// replayOrphan answers a regenerate whose parent is not found — deleted by
// its TTL after its retention — when the caller already has a task under
// the key that names this parent: the retry of a regenerate whose reply
// was lost, days ago (adversarial review: it got 404 while its task ran).
// The payload hash needs the parent's input, so the request is compared
// with what the task recorded of it: no input, and the task took its
// parent's (InputInherited), or the same input — 200 replay; else (another
// input, another parent, not a regenerate) 422 reuse, nothing written, as
// Create would answer. done=false: nothing recorded under the key (the 404
// stands).
func (h *Handler) replayOrphan(ctx context.Context, c *call, s submission) (resp events.APIGatewayV2HTTPResponse, done bool) {
	t, err := h.Ledger.Get(ctx, h.Ledger.TaskID(c.scope, s.key))
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return resp, false
	case err != nil:
		return h.reject(c, h.storeProblem(ctx, c, "get", err)), true
	case t.Scope != c.scope || t.PastRetention(h.now()):
		return resp, false
	}
	// No input named: the same request when the task took its parent's
	// input — or when it does not say (recorded before input_inherited
	// existed): a 422 there would tell a client whose request is the same
	// to use another key, and its work would run twice.
	same := t.ParentTaskID == c.route.taskID && s.input == "" && (t.InputInherited == nil || *t.InputInherited)
	if t.ParentTaskID == c.route.taskID && s.input != "" {
		if t.InputRef != nil {
			same = payload.Digest([]byte(s.input)) == t.InputRef.SHA256 // its content address
		} else {
			same = t.Input == s.input
		}
	}
	if !same {
		return h.keyReused(ctx, c, t.TaskID), true
	}
	return h.replayed(ctx, c, t), true
}

// create records n (the commit point), then sends the outbox message. A
// request whose task a check found recorded (call.recorded) is answered
// from that task by its payload hash, as Create would, writing nothing.
func (h *Handler) create(ctx context.Context, c *call, n ledger.NewTask) events.APIGatewayV2HTTPResponse {
	c.taskID = h.Ledger.TaskID(n.Scope, n.IdempotencyKey)
	if t := c.recorded; t != nil {
		if t.PayloadSHA256 == n.PayloadSHA256 {
			return h.replayed(ctx, c, t)
		}
		return h.keyReused(ctx, c, t.TaskID)
	}
	if p := h.placeInput(ctx, c, &n); p != nil {
		return h.reject(c, p)
	}
	t, err := h.Ledger.Create(ctx, n)
	var dup *ledger.DuplicateError
	var mm *ledger.PayloadMismatchError
	switch {
	case err == nil:
		c.outcome = "accepted"
		counters := []string{"TaskAccepted"}
		if !h.send(ctx, t) {
			counters = append(counters, "DispatchSendFailed")
		}
		h.count(ctx, t.TaskID, counters...)
		return h.taskResponse(ctx, c, http.StatusAccepted, t, map[string]string{"Location": c.route.prefix + "/tasks/" + t.TaskID})
	case errors.As(err, &dup):
		return h.replayed(ctx, c, dup.Task)
	case errors.As(err, &mm):
		return h.keyReused(ctx, c, mm.TaskID)
	}
	return h.storeFailure(ctx, c, "create", err)
}

// send is the outbox step after the put. A failure is logged and counted;
// the task is durable and the reconciler re-sends it after its due_at.
func (h *Handler) send(ctx context.Context, t *ledger.Task) bool {
	if h.Dispatch == nil {
		h.log().WarnContext(ctx, "api: no dispatcher configured; the reconciler will dispatch", "task_id", t.TaskID)
		return false
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), SendTimeout)
	defer cancel()
	if err := h.Dispatch.Send(sctx, t.TaskID, t.CorrelationID, 0); err != nil {
		h.log().WarnContext(ctx, "api: dispatch send failed; the reconciler will re-send after due_at",
			"task_id", t.TaskID, "due_at", t.DueAt, "error", err.Error())
		return false
	}
	return true
}

func (h *Handler) get(ctx context.Context, c *call) events.APIGatewayV2HTTPResponse {
	t, p := h.visible(ctx, c)
	if p != nil && p.Status == http.StatusNotFound {
		t, p = h.visibleToApprover(ctx, c, p)
	}
	if p != nil {
		return h.reject(c, p)
	}
	c.outcome = "read"
	return h.taskResponse(ctx, c, http.StatusOK, t, nil)
}

func (h *Handler) cancel(ctx context.Context, c *call) events.APIGatewayV2HTTPResponse {
	if _, p := h.visible(ctx, c); p != nil {
		return h.reject(c, p)
	}
	t, err := h.Ledger.Cancel(ctx, c.route.taskID)
	var ce *ledger.ConflictError
	if errors.As(err, &ce) {
		if r, ok := h.cancelRunning(ctx, c, ce); ok { // cancel.go
			return r
		}
	}
	switch {
	case err == nil:
		h.settleCancelled(ctx, t) // cancel.go
		c.outcome = "cancelled"
		return h.taskResponse(ctx, c, http.StatusOK, t, nil)
	case errors.As(err, &ce):
		c.outcome = "cancel_conflict"
		p := newProblem(TypeStateConflict, http.StatusConflict, "Task cannot be cancelled",
			fmt.Sprintf("Only queued, retry_wait or running tasks can be cancelled; this task is %s.", ce.State))
		p.TaskID, p.State = ce.TaskID, string(ce.State)
		return p.response()
	case errors.Is(err, ledger.ErrNotFound):
		return h.reject(c, notFound())
	}
	return h.storeFailure(ctx, c, "cancel", err)
}

// visible reads the task named in the path if the caller may see it.
// Another caller's task is reported exactly like a missing one.
func (h *Handler) visible(ctx context.Context, c *call) (*ledger.Task, *Problem) {
	id := c.route.taskID
	if !ledger.ValidTaskID(id) {
		return nil, notFound()
	}
	c.taskID = id
	t, err := h.Ledger.Get(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, notFound()
	}
	if err != nil {
		return nil, h.storeProblem(ctx, c, "get", err)
	}
	if t.Scope != c.scope {
		return nil, notFound()
	}
	return t, nil
}

func (h *Handler) reject(c *call, p *Problem) events.APIGatewayV2HTTPResponse {
	if c.outcome == "" {
		c.outcome = "rejected"
	}
	return p.response()
}

func (h *Handler) storeFailure(ctx context.Context, c *call, op string, err error) events.APIGatewayV2HTTPResponse {
	return h.storeProblem(ctx, c, op, err).response()
}

// storeProblem maps a ledger error to 503 (throttled, timed out) or 500.
func (h *Handler) storeProblem(ctx context.Context, c *call, op string, err error) *Problem {
	var te *ledger.ThrottledError
	switch {
	case errors.As(err, &te):
		c.outcome = "throttled"
		h.count(ctx, c.taskID, "RequestThrottled")
		h.log().WarnContext(ctx, "api: task store throttled", "op", op, "task_id", c.taskID)
		return throttled(te.RetryAfter)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		c.outcome = "timeout"
		p := throttled(time.Second)
		p.Type, p.Title = TypeUnavailable, "Service unavailable"
		p.Detail = "The task store did not answer in time. Retrying with the same Idempotency-Key is safe: it can never create a second task."
		return p
	}
	c.outcome = "error"
	h.log().ErrorContext(ctx, "api: task store error", "op", op, "task_id", c.taskID, "error", err.Error())
	return internalError()
}

func (h *Handler) taskResponse(ctx context.Context, c *call, status int, t *ledger.Task, extra map[string]string) events.APIGatewayV2HTTPResponse {
	var r *ledger.Review
	if t.State == ledger.StateNeedsReview {
		var err error
		if r, err = h.Ledger.GetReview(ctx, t.TaskID); err != nil {
			// The task carries the reason and summary; show those.
			h.log().WarnContext(ctx, "api: review item unavailable", "task_id", t.TaskID, "error", err.Error())
			r = nil
		}
	}
	view := NewTaskView(t, r)
	if p := h.resolveResult(ctx, c, t, &view); p != nil {
		return h.reject(c, p)
	}
	h.withApproval(ctx, c, &view, t)
	h.spendView(ctx, t, &view, status == http.StatusAccepted && t.Attempts == 0)
	view.Progress = progressOf(t, h.now(), view.Result) // progress.go
	view.AttemptsHistory = historyOf(t, view.Progress.Tokens)
	body, err := json.Marshal(view)
	if err != nil {
		return internalError().response()
	}
	headers := map[string]string{
		"Content-Type":           "application/json",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
		responseCorrelationName:  t.CorrelationID,
	}
	for k, v := range extra {
		headers[k] = v
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: headers, Body: string(body)}
}

// count emits one EMF record adding 1 to each named counter (the task id
// as a property, never task text). Without a writer or a name it writes
// nothing (metrics.Record.Flush).
func (h *Handler) count(ctx context.Context, taskID string, names ...string) {
	rec := h.Metrics.Record("Function", "submit")
	for _, n := range names {
		rec.Add(n, 1, metrics.Count)
	}
	if taskID != "" {
		rec.Property("task_id", taskID)
	}
	if err := rec.Flush(); err != nil {
		h.log().WarnContext(ctx, "api: metrics write failed", "error", err.Error())
	}
}
