package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// MaxNote is the longest accepted decision note, in bytes.
const MaxNote = 1000

// ApprovalPolicy says who may approve, reject or withdraw a task awaiting
// approval (DESIGN §10).
//
// Without Claim, only the task's owner (its caller scope) decides: with no
// authorizer everyone is "anonymous", so anyone who knows the task id. With
// Claim, a caller whose JWT claim (or Lambda authorizer context value)
// Claim holds Value is an approver and may decide on (and read) any gated
// task by id; nobody else may decide. "Holds" means whole names only (see
// claimHolds): the claim equals Value, or is a list with an element equal
// to it — a JSON array, or API Gateway's rendering of a list claim such as
// cognito:groups, "[a b]". A group "approvers (pending)" or
// "trainee,approvers" is not the group "approvers". NoSelfApproval refuses a caller's decision on
// their own task (four eyes); the zero value allows it.
type ApprovalPolicy struct {
	Claim          string
	Value          string
	NoSelfApproval bool
}

// ParseApprovalPolicy reads APPROVER_CLAIM, APPROVER_CLAIM_VALUE (default
// "true") and ALLOW_SELF_APPROVAL ("true" or "false"; default true).
func ParseApprovalPolicy(claim, value, self string) (ApprovalPolicy, error) {
	p := ApprovalPolicy{Claim: strings.TrimSpace(claim), Value: strings.TrimSpace(value)}
	if p.Value == "" {
		p.Value = "true"
	}
	if strings.ContainsFunc(p.Value, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		// API Gateway passes a list claim as "[a b]": a value with a space
		// would match two neighbouring groups, and a comma-joined value is
		// how another group's name reads in a comma-separated claim.
		return p, fmt.Errorf("APPROVER_CLAIM_VALUE=%q contains a space or comma: API Gateway renders a list claim as its elements joined by spaces, so such a value cannot be told apart from other groups; name a group without spaces or commas", clip(p.Value, 64))
	}
	if s := strings.TrimSpace(self); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return p, fmt.Errorf("ALLOW_SELF_APPROVAL=%q: want true or false", clip(s, 16))
		}
		p.NoSelfApproval = !b
	}
	if p.Claim == "" && p.NoSelfApproval {
		return p, errors.New("ALLOW_SELF_APPROVAL=false needs APPROVER_CLAIM: without an approver claim only a task's owner can decide")
	}
	return p, nil
}

// name is the policy as recorded with a decision.
func (p ApprovalPolicy) name(self bool) string {
	s := "owner"
	if p.Claim != "" {
		s = "approver_claim:" + p.Claim + "=" + p.Value
	}
	if self {
		s += ";self"
	}
	return s
}

// approver reports whether the request's authorizer names an approver.
func (p ApprovalPolicy) approver(rc events.APIGatewayV2HTTPRequestContext) bool {
	a := rc.Authorizer
	if p.Claim == "" || a == nil {
		return false
	}
	var raw string
	switch {
	case a.JWT != nil:
		raw = a.JWT.Claims[p.Claim]
	case a.Lambda != nil:
		switch v := a.Lambda[p.Claim].(type) {
		case string:
			raw = v
		case bool:
			raw = strconv.FormatBool(v)
		case []any:
			for _, x := range v {
				if s, ok := x.(string); ok && s == p.Value {
					return true
				}
			}
		}
	}
	return claimHolds(raw, p.Value)
}

// claimHolds reports whether a claim as API Gateway passes it (a string)
// holds value, comparing whole names only: "[a b]" — API Gateway's
// rendering of a JWT list claim, single spaces between the elements — by
// its elements; anything else is one name, compared exactly (never split on
// spaces or commas). A claim is never read as JSON: API Gateway does not
// send one, so a string that looks like a JSON array is the rendering of
// groups whose names hold quotes (the group "\"approvers\"" arrives as
// ["approvers"]), and decoding it would make their members approvers.
// value has no space or comma (ParseApprovalPolicy), so an element holding
// one is never it. One ambiguity is API Gateway's, not ours: it renders the
// list ["approvers (pending)"] as "[approvers (pending)]", exactly as it
// renders ["approvers","(pending)"]. Cognito group names cannot hold a
// space; with another issuer, let no group name hold the approver group's
// as a word (or use a claim that is not a list).
func claimHolds(raw, value string) bool {
	if raw == value {
		return true
	}
	inner, ok := strings.CutPrefix(raw, "[")
	if !ok {
		return false
	}
	if inner, ok = strings.CutSuffix(inner, "]"); !ok {
		return false
	}
	return slices.Contains(strings.Split(inner, " "), value)
}

// decision is a validated approve, reject or withdraw body.
type decision struct {
	artifactSHA256 string
	note           string
	edited         string // canonical JSON object; "" for none
	round          *int   // approve: the approval round the approver was shown
}

func parseDecision(h map[string]string, body []byte, approve bool) (decision, *Problem) {
	var d decision
	allowed := []string{"note"}
	if approve {
		allowed = []string{"artifact_sha256", "note", "edited_result", "approval_round"}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if approve {
			return d, invalidBody("artifact_sha256", `Send {"artifact_sha256":"<the result_sha256 you were shown>"}.`)
		}
		return d, nil
	}
	if p := requireJSON(h); p != nil {
		return d, p
	}
	fields, p := parseObject(body, allowed...)
	if p != nil {
		return d, p
	}
	if raw, ok := fields["note"]; ok && !bytes.Equal(raw, []byte("null")) {
		if json.Unmarshal(raw, &d.note) != nil || len(d.note) > MaxNote || !utf8.ValidString(d.note) {
			return d, invalidBody("note", fmt.Sprintf(`Field "note" must be a string of at most %d bytes.`, MaxNote))
		}
	}
	if !approve {
		return d, nil
	}
	raw, ok := fields["artifact_sha256"]
	if !ok || json.Unmarshal(raw, &d.artifactSHA256) != nil || !hexSHA256(d.artifactSHA256) {
		return d, invalidBody("artifact_sha256", `Field "artifact_sha256" is required: the 64 lowercase hex characters of the task's result_sha256 you approve.`)
	}
	if raw, ok := fields["approval_round"]; ok && !bytes.Equal(raw, []byte("null")) {
		var r int
		if json.Unmarshal(raw, &r) != nil || r < 0 {
			return d, invalidBody("approval_round", `Field "approval_round" must be the task's approval.round you were shown (a whole number, 0 before any withdrawal).`)
		}
		d.round = &r
	}
	if raw, ok := fields["edited_result"]; ok && !bytes.Equal(raw, []byte("null")) {
		if raw[0] != '{' {
			return d, invalidBody("edited_result", `Field "edited_result" must be a JSON object (the result as edited).`)
		}
		canon, err := CanonicalJSON(raw)
		if err != nil {
			return d, malformed("edited_result is not valid JSON.")
		}
		if len(canon) > destination.MaxPayloadBytes {
			return d, newProblem(TypeInputTooLarge, http.StatusRequestEntityTooLarge, "Edited result too large",
				fmt.Sprintf("edited_result is %d bytes in canonical JSON form; at most %d are accepted.", len(canon), destination.MaxPayloadBytes)).withField("edited_result")
		}
		d.edited = string(canon)
	}
	return d, nil
}

func hexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// decidable reads the task named in the path for a decision: the owner
// may see it; an approver may see any gated task. It returns whether the
// caller decides on their own task.
func (h *Handler) decidable(ctx context.Context, c *call) (*ledger.Task, bool, *Problem) {
	id := c.route.taskID
	if !ledger.ValidTaskID(id) {
		return nil, false, notFound()
	}
	c.taskID = id
	t, err := h.Ledger.Get(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, false, notFound()
	}
	if err != nil {
		return nil, false, h.storeProblem(ctx, c, "get", err)
	}
	owner := t.Scope == c.scope
	approver := h.Approvals.approver(c.req.RequestContext)
	switch {
	case !owner && !(approver && t.ApprovalRequired):
		return nil, false, notFound()
	case !t.ApprovalRequired:
		// The owner's own task with no gate: there is nothing to decide,
		// whoever may decide (decide answers 409, not 403).
		return t, owner, nil
	case h.Approvals.Claim != "" && !approver:
		return nil, owner, forbidden(fmt.Sprintf("Only approvers (authorizer claim %q) may decide on an approval.", h.Approvals.Claim))
	case owner && h.Approvals.NoSelfApproval:
		return nil, owner, forbidden("Self-approval is not allowed: another approver must decide on your task.")
	}
	return t, owner, nil
}

func forbidden(detail string) *Problem {
	return newProblem(TypeForbidden, http.StatusForbidden, "Not allowed to decide", detail)
}

// decide serves POST /tasks/{id}/approve|reject|withdraw.
func (h *Handler) decide(ctx context.Context, c *call) events.APIGatewayV2HTTPResponse {
	body, p := h.body(c)
	if p != nil {
		return h.reject(c, p)
	}
	d, p := parseDecision(c.headers, body, c.route.id == routeApprove)
	if p != nil {
		return h.reject(c, p)
	}
	t, self, p := h.decidable(ctx, c)
	if p != nil {
		return h.reject(c, p)
	}
	if !t.ApprovalRequired {
		return h.notAwaiting(c, t, map[routeID]string{routeApprove: "approved", routeReject: "rejected", routeWithdraw: "withdrawn"}[c.route.id])
	}
	policy := h.Approvals.name(self)
	switch c.route.id {
	case routeApprove:
		return h.approve(ctx, c, t, d, policy)
	case routeReject:
		if t.State != ledger.StateAwaitingApproval && t.State != ledger.StateRejected {
			return h.notAwaiting(c, t, "rejected")
		}
		got, replay, err := h.Ledger.Reject(ctx, t, c.scope, d.note, policy)
		if err != nil {
			return h.decisionFailure(ctx, c, "reject", err)
		}
		c.outcome = map[bool]string{false: "rejected_task", true: "reject_replayed"}[replay]
		return h.taskResponse(ctx, c, http.StatusOK, got, nil)
	}
	got, err := h.Ledger.Withdraw(ctx, t.TaskID, c.scope, d.note, policy, h.Notify.Withdrawn)
	var se *ledger.DeliveriesStartedError
	if errors.As(err, &se) {
		c.outcome = "withdraw_too_late"
		started := ledger.Started(se.Deliveries)
		names := make([]string, 0, len(started))
		for _, s := range started {
			names = append(names, s.TaskID+" ("+string(s.State)+")")
		}
		p := newProblem(TypeDeliveriesStarted, http.StatusConflict, "Deliveries already started",
			"The approval cannot be withdrawn: these deliveries have started and their outcome stands: "+strings.Join(names, ", ")+". Nothing was changed.")
		p.TaskID, p.State = t.TaskID, string(ledger.StateCompleted)
		p.Deliveries = DeliveryViews(se.Deliveries)
		return p.response()
	}
	if err != nil {
		return h.decisionFailure(ctx, c, "withdraw", err)
	}
	c.outcome = "withdrawn"
	return h.taskResponse(ctx, c, http.StatusOK, got, nil)
}

func (h *Handler) approve(ctx context.Context, c *call, t *ledger.Task, d decision, policy string) events.APIGatewayV2HTTPResponse {
	if t.State != ledger.StateAwaitingApproval && !(t.State == ledger.StateCompleted && t.ApprovalState == ledger.ApprovalApproved) {
		return h.notAwaiting(c, t, "approved")
	}
	if d.round != nil && *d.round != t.ApprovalRound && d.artifactSHA256 == t.ResultSHA256 {
		// (An approve of another artifact is answered artifact-changed by
		// the ledger below: the more specific answer.)
		// The approval was withdrawn since the approver read the task: a
		// repeat of their approve (a lost reply retried) must not approve
		// the new round over the withdraw. The ledger's Approve is
		// conditioned on the round read here, so a withdraw landing in
		// between fails it too.
		c.outcome = "round_changed"
		p := newProblem(TypeApprovalRoundChanged, http.StatusConflict, "Approval round changed",
			fmt.Sprintf("You approved approval round %d; the approval was withdrawn since (round %d now). Read the task again and decide on what it shows. Nothing was changed.", *d.round, t.ApprovalRound)).
			withField("approval_round")
		p.TaskID, p.State = t.TaskID, string(t.State)
		return p.response()
	}
	pl, err := storedPlan(t)
	if err != nil {
		h.log().ErrorContext(ctx, "api: stored plan is not JSON", "task_id", t.TaskID, "plan_bytes", len(t.Plan))
		return h.reject(c, internalError())
	}
	if t.ResultRef != nil && t.Result == "" {
		// The artifact went through the S3 claim-check: the deliveries carry
		// its exact bytes, read (and verified) from the payload bucket.
		b, p := h.offloadedResult(ctx, c, t)
		if p != nil {
			return h.reject(c, p)
		}
		withBytes := *t
		withBytes.Result = string(b)
		t = &withBytes
	}
	req, err := newApproveRequest(t, pl, d.artifactSHA256, d.edited, c.scope, d.note, policy, h.now())
	var nd *NotDeliverableError
	if errors.As(err, &nd) {
		c.outcome = "not_deliverable"
		return newProblem(TypeArtifactNotDeliverable, http.StatusUnprocessableEntity, "Artifact cannot be delivered",
			nd.Error()+"; nothing was written.").withField("edited_result").response()
	}
	// The approval completes the task: its requester is told, in the
	// approval's transaction (DESIGN §15).
	req.FollowUps = h.Notify.Approved(t)
	got, replay, err := h.Ledger.Approve(ctx, t, req)
	if err != nil {
		return h.decisionFailure(ctx, c, "approve", err)
	}
	if replay {
		c.outcome = "approve_replayed"
		return h.taskResponse(ctx, c, http.StatusOK, got, nil)
	}
	c.outcome = "approved"
	// The outbox: the deliveries are durable (queued, due for dispatch);
	// the relay re-sends what these sends miss.
	failed := 0
	for _, id := range got.DeliveryIDs {
		if !h.send(ctx, &ledger.Task{TaskID: id, CorrelationID: got.CorrelationID}) {
			failed++
		}
	}
	counters := []string{"TaskApproved"}
	if failed > 0 {
		counters = append(counters, "DispatchSendFailed")
	}
	h.count(ctx, got.TaskID, counters...)
	return h.taskResponse(ctx, c, http.StatusOK, got, nil)
}

func (h *Handler) notAwaiting(c *call, t *ledger.Task, verb string) events.APIGatewayV2HTTPResponse {
	c.outcome = "decision_conflict"
	detail := fmt.Sprintf("Only a task awaiting approval can be %s; this task is %s. Nothing was changed.", verb, t.State)
	if !t.ApprovalRequired {
		detail = fmt.Sprintf("This task has no approval gate (it was submitted without \"approval\":{\"required\":true}); it cannot be %s.", verb)
	}
	p := newProblem(TypeStateConflict, http.StatusConflict, "Task is not awaiting approval", detail)
	p.TaskID, p.State = t.TaskID, string(t.State)
	return p.response()
}

// decisionFailure maps the ledger's decision errors to problems.
func (h *Handler) decisionFailure(ctx context.Context, c *call, op string, err error) events.APIGatewayV2HTTPResponse {
	var ac *ledger.ArtifactChangedError
	var ce *ledger.ConflictError
	var tl *ledger.ItemTooLargeError
	switch {
	case errors.As(err, &ac):
		c.outcome = "artifact_changed"
		p := newProblem(TypeArtifactChanged, http.StatusConflict, "Artifact changed",
			"artifact_sha256 is not the hash of the task's current result (result_sha256); read the task again and approve what it shows. Nothing was changed.").
			withField("artifact_sha256")
		p.TaskID, p.ResultSHA256 = ac.TaskID, ac.CurrentSHA256
		if ac.Task != nil {
			p.State = string(ac.Task.State)
		}
		return p.response()
	case errors.As(err, &ce) && op == "withdraw":
		c.outcome = "decision_conflict"
		p := newProblem(TypeStateConflict, http.StatusConflict, "Nothing to withdraw",
			fmt.Sprintf("Only an approved task can have its approval withdrawn; this task is %s. Nothing was changed.", ce.State))
		p.TaskID, p.State = ce.TaskID, string(ce.State)
		return p.response()
	case errors.As(err, &ce):
		if ce.Task != nil {
			return h.notAwaiting(c, ce.Task, map[string]string{"approve": "approved", "reject": "rejected", "withdraw": "withdrawn"}[op])
		}
		c.outcome = "decision_conflict"
		p := newProblem(TypeStateConflict, http.StatusConflict, "Task is not awaiting approval", "Nothing was changed.")
		p.TaskID, p.State = ce.TaskID, string(ce.State)
		return p.response()
	case errors.As(err, &tl):
		c.outcome = "too_large"
		return newProblem(TypeInputTooLarge, http.StatusRequestEntityTooLarge, "Approval too large",
			"The approved artifact does not fit the task or its deliveries (DynamoDB's 400 KB item limit); nothing was written.").response()
	case errors.Is(err, ledger.ErrNotFound):
		return h.reject(c, notFound())
	}
	return h.storeFailure(ctx, c, op, err)
}

// visibleToApprover lets an approver read another caller's gated task
// (they decide on what they read); anyone else gets notVisible.
func (h *Handler) visibleToApprover(ctx context.Context, c *call, notVisible *Problem) (*ledger.Task, *Problem) {
	if !h.Approvals.approver(c.req.RequestContext) || !ledger.ValidTaskID(c.route.taskID) {
		return nil, notVisible
	}
	t, err := h.Ledger.Get(ctx, c.route.taskID)
	if err != nil || !t.ApprovalRequired {
		return nil, notVisible
	}
	return t, nil
}

// NotDeliverableError: the approved artifact does not make a valid deliver
// input for plan entry Index (too large, not an object).
type NotDeliverableError struct {
	Index int
	Err   error
}

func (e *NotDeliverableError) Error() string {
	return fmt.Sprintf("deliver[%d]: the approved artifact does not make a valid deliver input (%s)", e.Index, clip(e.Err.Error(), 200))
}

// newApproveRequest builds the approval of t (a task awaiting approval) of
// the artifact with hash artifactSHA256, edited to edited (canonical JSON;
// "" for none): one deliver task per entry of t's plan, in t's scope, keyed
// ledger.DeliveryKey with the approved artifact's hash, its input
// {"destination","params","payload":<approved artifact>} in canonical form.
// The HTTP API and the operator CLI approve through it.
func newApproveRequest(t *ledger.Task, pl plan, artifactSHA256, edited, by, note, policy string, now time.Time) (ledger.ApproveRequest, error) {
	artifact, approved := t.Result, artifactSHA256
	if edited != "" {
		artifact, approved = edited, ledger.SHA256Hex(edited)
	}
	req := ledger.ApproveRequest{ArtifactSHA256: artifactSHA256, EditedResult: edited, By: by, Note: note, Policy: policy}
	at := now.UTC().Format(time.RFC3339Nano)
	for i, e := range pl.deliveries {
		// The payload is the approved artifact's exact bytes (never
		// re-encoded), so the hash the destination sees and the receipt's
		// payload_sha256 are the artifact_sha256 the approver approved.
		params := e.Params
		if len(params) == 0 {
			params = json.RawMessage(`{}`)
		}
		input := `{"destination":` + string(jsonString(e.Destination)) + `,"params":` + string(params) + `,"payload":` + artifact + `}`
		canon := []byte(input)
		_, err := destination.ParseDeliverInput(canon)
		if err != nil {
			return req, &NotDeliverableError{Index: i, Err: err}
		}
		req.Deliveries = append(req.Deliveries, ledger.NewTask{
			Scope:          t.Scope,
			IdempotencyKey: ledger.DeliveryKey(t.TaskID, approved, i, t.ApprovalRound),
			Kind:           ledger.KindDeliver,
			Input:          string(canon),
			PayloadSHA256:  payloadHash(ledger.KindDeliver, string(canon), t.TaskID),
			ParentTaskID:   t.TaskID,
			CorrelationID:  t.CorrelationID,
			DecidedBy:      by,
			DecidedAt:      at,
			ApprovalPolicy: policy,
		})
	}
	return req, nil
}

// ApproveAsOperator builds the approval of t for the operator CLI (see
// newApproveRequest); edited is the edited result's JSON ("" for none).
func ApproveAsOperator(t *ledger.Task, artifactSHA256, edited, by, note string, now time.Time) (ledger.ApproveRequest, error) {
	pl, err := storedPlan(t)
	if err != nil {
		return ledger.ApproveRequest{}, err
	}
	if t.ResultRef != nil && t.Result == "" && edited == "" {
		return ledger.ApproveRequest{}, fmt.Errorf("task %s's result is kept in the S3 payload bucket (%d bytes): approve it through the API (POST /tasks/%s/approve), which reads and verifies it; the CLI does not read payloads", t.TaskID, t.ResultRef.Size, t.TaskID)
	}
	if edited != "" {
		canon, err := CanonicalJSON([]byte(edited))
		if err != nil || len(canon) == 0 || canon[0] != '{' {
			return ledger.ApproveRequest{}, errors.New("the edited result must be one JSON object")
		}
		edited = string(canon)
	}
	return newApproveRequest(t, pl, artifactSHA256, edited, by, note, OperatorPolicy, now)
}

// OperatorPolicy is the policy recorded for decisions made with the
// operator CLI (direct table access: the IAM policy that grants it is the
// approver check).
const OperatorPolicy = "operator_cli"
