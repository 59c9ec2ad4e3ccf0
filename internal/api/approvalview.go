package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// ApprovalView is a gated task's approval (DESIGN §10): state pending,
// approved, rejected, withdrawn or expired; the artifact the decision
// concerns (pending: the current result); who decided, when, and the note.
type ApprovalView struct {
	State          string `json:"state"`
	ArtifactSHA256 string `json:"artifact_sha256,omitempty"`
	DecidedBy      string `json:"decided_by,omitempty"`
	DecidedAt      string `json:"decided_at,omitempty"`
	Note           string `json:"note,omitempty"`
	// Policy names the rule that allowed the decision.
	Policy string `json:"policy,omitempty"`
	// ExpiresAt is the approval deadline (RFC 3339) while awaiting it.
	ExpiresAt string `json:"expires_at,omitempty"`
	// Round counts the approval's withdrawals (0 before the first). An
	// approve may send the round it was shown ("approval_round"): after a
	// withdraw it no longer matches, so a stale repeat cannot re-approve.
	Round int `json:"round"`
}

// PlanView is a gated task's deliver plan as submitted: each entry's
// destination and params (canonical JSON), in plan order. An empty Deliver
// says an approval delivers nothing.
type PlanView struct {
	Deliver []PlanEntryView `json:"deliver"`
}

// PlanEntryView is one deliver step of a plan.
type PlanEntryView struct {
	Destination string          `json:"destination"`
	Params      json.RawMessage `json:"params"`
}

// DeliveryView is one deliver task of an approval.
type DeliveryView struct {
	TaskID      string `json:"task_id"`
	Destination string `json:"destination"`
	State       string `json:"state"`
}

// showsResult reports whether the view shows t's result: completed, and
// every state of a gated task that holds one (the artifact to decide on).
func showsResult(t *ledger.Task) bool {
	switch t.State {
	case ledger.StateCompleted, ledger.StateAwaitingApproval, ledger.StateRejected:
		return true
	case ledger.StateNeedsReview:
		return t.ReviewReason == ledger.ReviewApprovalExpired
	}
	return false
}

// approvalView renders t's approval; nil for a task without a gate.
func approvalView(t *ledger.Task) *ApprovalView {
	if !t.ApprovalRequired {
		return nil
	}
	v := &ApprovalView{State: t.ApprovalState, ArtifactSHA256: t.ApprovalSHA256, DecidedBy: t.DecidedBy,
		DecidedAt: t.DecidedAt, Note: t.ApprovalNote, Policy: t.ApprovalPolicy, Round: t.ApprovalRound}
	switch {
	case t.State == ledger.StateNeedsReview && t.ReviewReason == ledger.ReviewApprovalExpired:
		v.State = ledger.ApprovalExpired
	case v.State == "":
		v.State = ledger.ApprovalPending
	}
	if t.State == ledger.StateAwaitingApproval || v.ArtifactSHA256 == "" {
		v.ArtifactSHA256 = t.ResultSHA256
		if t.ApprovalDeadlineMs > 0 {
			v.ExpiresAt = rfc3339Ms(t.ApprovalDeadlineMs)
		}
	}
	return v
}

// DeliveryViews renders deliver tasks (a missing one shows state "").
func DeliveryViews(ds []*ledger.Task) []DeliveryView {
	out := make([]DeliveryView, 0, len(ds))
	for _, d := range ds {
		v := DeliveryView{TaskID: d.TaskID, State: string(d.State)}
		if in, err := destination.ParseDeliverInput(json.RawMessage(d.Input)); err == nil {
			v.Destination = in.Destination
		}
		out = append(out, v)
	}
	return out
}

// withApproval adds the approval, the plan (to a caller who may decide)
// and the deliveries (read consistently: the standing approval's, then
// withdrawn ones) to v.
func (h *Handler) withApproval(ctx context.Context, c *call, v *TaskView, t *ledger.Task) {
	if showsResult(t) {
		v.ResultSHA256 = t.ResultSHA256
	}
	v.GeneratedSHA256 = t.GeneratedSHA256
	v.Approval = approvalView(t)
	switch {
	case v.Approval != nil && h.mayDecide(c, t):
		v.Plan = h.planView(ctx, t)
	case v.Approval == nil && t.Plan != "" && t.Scope == c.scope:
		// A plan without approval: its owner sees where the result goes.
		v.Plan = h.planView(ctx, t)
	}
	ids := append(append([]string{}, t.DeliveryIDs...), t.WithdrawnDeliveryIDs...)
	if len(ids) == 0 {
		return
	}
	ds, err := h.Ledger.Deliveries(ctx, ids)
	if err != nil {
		h.log().WarnContext(ctx, "api: deliveries unavailable", "task_id", t.TaskID, "error", err.Error())
		ds = make([]*ledger.Task, len(ids))
		for i, id := range ids {
			ds[i] = &ledger.Task{TaskID: id}
		}
	}
	v.Deliveries = DeliveryViews(ds)
}

// mayDecide reports whether the caller may approve, reject or withdraw
// t (decidable's rule): the owner when no approver claim is configured;
// otherwise an approver, unless the task is their own and self-approval
// is off. They decide on where the artifact goes, so they are shown the
// plan.
func (h *Handler) mayDecide(c *call, t *ledger.Task) bool {
	owner := t.Scope == c.scope
	if h.Approvals.Claim == "" {
		return owner
	}
	return h.Approvals.approver(c.req.RequestContext) && !(owner && h.Approvals.NoSelfApproval)
}

// planView renders t's stored plan; nil (and a logged error) if it cannot
// be read, which approve refuses too.
func (h *Handler) planView(ctx context.Context, t *ledger.Task) *PlanView {
	pl, err := storedPlan(t)
	if err != nil {
		h.log().ErrorContext(ctx, "api: stored plan is not JSON", "task_id", t.TaskID, "plan_bytes", len(t.Plan))
		return nil
	}
	v := &PlanView{Deliver: make([]PlanEntryView, 0, len(pl.deliveries))}
	for _, e := range pl.deliveries {
		params := e.Params
		if len(params) == 0 {
			params = json.RawMessage(`{}`)
		}
		v.Deliver = append(v.Deliver, PlanEntryView{Destination: e.Destination, Params: params})
	}
	return v
}

func rfc3339Ms(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
