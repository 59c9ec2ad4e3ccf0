package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// DirectDeliver says who may submit a deliver task directly
// ({"kind":"deliver"}) — a delivery no approval gate stands before, so a
// permission of its own (DESIGN §15). Env DIRECT_DELIVER, template
// parameter DirectDeliver.
type DirectDeliver string

// The DirectDeliver settings. The zero value reads as ApproversOnly.
const (
	// DirectDeliverApproversOnly (the default): with an approver claim
	// (ApprovalPolicy.Claim), only callers it names as approvers — the
	// people who could have approved such a delivery; everyone else gets
	// 403. Without an approver claim every caller may: the owner-only
	// approval policy lets any caller approve their own gated task, so
	// the gate separates nobody and a refusal would protect nothing.
	DirectDeliverApproversOnly DirectDeliver = "ApproversOnly"
	// DirectDeliverAnyone: every caller may.
	DirectDeliverAnyone DirectDeliver = "Anyone"
	// DirectDeliverDisabled: nobody may; every delivery comes from an
	// approval of a gated task's plan.
	DirectDeliverDisabled DirectDeliver = "Disabled"
)

// ParseDirectDeliver reads DIRECT_DELIVER: ApproversOnly (also when
// empty), Anyone or Disabled, in any case.
func ParseDirectDeliver(s string) (DirectDeliver, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DirectDeliverApproversOnly, nil
	}
	for _, d := range []DirectDeliver{DirectDeliverApproversOnly, DirectDeliverAnyone, DirectDeliverDisabled} {
		if strings.EqualFold(s, string(d)) {
			return d, nil
		}
	}
	return "", fmt.Errorf("DIRECT_DELIVER=%q: want %s, %s or %s", clip(s, 32), DirectDeliverApproversOnly, DirectDeliverAnyone, DirectDeliverDisabled)
}

// mayDeliverDirectly refuses a direct deliver submit the DirectDeliver
// setting does not allow this caller: 403, before anything is checked
// against the destinations or written.
func (h *Handler) mayDeliverDirectly(c *call) *Problem {
	var why string
	switch h.DirectDeliver {
	case DirectDeliverAnyone:
		return nil
	case DirectDeliverDisabled:
		why = "This deployment does not accept deliver tasks submitted directly (DirectDeliver=Disabled)."
	default: // ApproversOnly
		if h.Approvals.Claim == "" || h.Approvals.approver(c.req.RequestContext) {
			return nil
		}
		why = fmt.Sprintf("Only approvers (authorizer claim %q) may submit a deliver task directly (DirectDeliver=ApproversOnly).", h.Approvals.Claim)
	}
	c.outcome = "direct_deliver_forbidden"
	return newProblem(TypeDirectDeliverForbidden, http.StatusForbidden, "Direct delivery not allowed",
		why+` Submit a generate task with "approval":{"required":true} and a "deliver" plan: an approver's approval creates the delivery. Nothing was written.`).withField("kind")
}

// directProvenance is the provenance of a task a caller submits: a direct
// delivery by that caller for a deliver task; none for any other kind. It
// comes from the authorizer's caller scope, never from the request body.
func directProvenance(kind, scope string) *ledger.Provenance {
	if kind != ledger.KindDeliver {
		return nil
	}
	return &ledger.Provenance{Type: ledger.ProvenanceDirect, Caller: scope}
}
