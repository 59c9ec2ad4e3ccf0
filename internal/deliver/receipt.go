package deliver

import (
	"encoding/json"
	"time"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TaskReceipt is the part of a deliver task's receipt that a generate task
// does not have (DESIGN §10, seed 001's table), as the task view and the
// operator CLI show it. Every field is present, empty until known: the
// destination fields come from the destination's receipt (the task's
// result), the approval fields from the approval that created the task
// (empty for a direct deliver submit).
type TaskReceipt struct {
	Destination         string `json:"destination"`
	DestinationIdentity string `json:"destination_identity"`
	PublicURL           string `json:"public_url"`
	ReadbackResult      string `json:"readback_result"`
	ApprovedBy          string `json:"approved_by"`
	ApprovedAt          string `json:"approved_at"`
	Policy              string `json:"policy"`

	// PayloadSHA256 is the hash of the payload delivered (the artifact),
	// as the destination received it — not the request's hash.
	PayloadSHA256 string `json:"-"`
	// ProviderRef and ReadbackAt are the destination's reference and the
	// readback time from its receipt ("" if not known).
	ProviderRef string `json:"-"`
	ReadbackAt  string `json:"-"`
}

// ReceiptOfTask returns t's delivery receipt; ok=false when t is not a
// deliver task.
func ReceiptOfTask(t *ledger.Task) (TaskReceipt, bool) {
	if t == nil || t.Kind != Kind {
		return TaskReceipt{}, false
	}
	// The approval behind a deliver task an approval created: the
	// decision's who, when and policy, written on the deliver task by the
	// approval's transaction (empty for a direct deliver submit).
	r := TaskReceipt{ApprovedBy: t.DecidedBy, ApprovedAt: t.DecidedAt, Policy: t.ApprovalPolicy}
	if in, err := destination.ParseDeliverInput(json.RawMessage(t.Input)); err == nil {
		r.Destination = in.Destination
		r.PayloadSHA256 = destination.HashPayload(in.Payload)
	}
	if rc, ok := ReceiptOf(t.Result); ok {
		r.Destination = rc.Destination
		r.DestinationIdentity = rc.DestinationIdentity
		r.PublicURL = rc.PublicURL
		r.ReadbackResult = rc.ReadbackResult
		r.ProviderRef = rc.ProviderRef
		if rc.PayloadSHA256 != "" {
			r.PayloadSHA256 = rc.PayloadSHA256
		}
		if !rc.ReadbackAt.IsZero() {
			r.ReadbackAt = rc.ReadbackAt.UTC().Format(time.RFC3339)
		}
	}
	return r, true
}
