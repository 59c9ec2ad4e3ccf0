package api

import (
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// ProvenanceView is where a deliver task came from, exactly as its
// destination is told (deliver.ProvenanceOf): {"type":"approval",
// "task_id","artifact_sha256","decided_by","round"} or
// {"type":"direct","caller"}.
type ProvenanceView = destination.Provenance

// provenanceView is t's provenance (nil unless a deliver task).
func provenanceView(t *ledger.Task) *ProvenanceView { return deliver.ProvenanceOf(t) }

// DeliveryReceipt holds the receipt fields of a deliver task (every field
// of DESIGN §10's receipt; see deliver.TaskReceipt).
type DeliveryReceipt = deliver.TaskReceipt

// addDeliveryReceipt fills rv's delivery fields for a deliver task. Its
// payload_sha256 is the hash of the payload delivered (the artifact), not
// the request's hash.
func addDeliveryReceipt(rv *ReceiptView, t *ledger.Task) {
	d, ok := deliver.ReceiptOfTask(t)
	if !ok {
		return
	}
	if d.PayloadSHA256 != "" {
		rv.PayloadSHA256 = d.PayloadSHA256
	}
	if rv.ProviderRef == "" {
		rv.ProviderRef = d.ProviderRef
	}
	if rv.ReadbackAt == "" {
		rv.ReadbackAt = d.ReadbackAt
	}
	rv.DeliveryReceipt = &d
}
