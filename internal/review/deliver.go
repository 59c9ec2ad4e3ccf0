package review

import (
	"fmt"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// DeliveryUnknownOutcome describes a deliver task (DESIGN §10) whose
// destination may have acted and which cannot be settled automatically: the
// destination has no readback, or its readback never showed the delivery and
// its "not found" is not credible, and it does not deduplicate by operation
// id — so taskledger never sends it again on its own. why says what the
// readback found; guarantees is the destination's declaration.
func DeliveryUnknownOutcome(t *ledger.Task, dest, guarantees string, at time.Time, why string) ledger.Review {
	id := t.TaskID
	when := at.UTC().Format(time.RFC3339)
	if dest == "" {
		dest = "the destination"
	}
	r := ledger.Review{Reason: ledger.ReviewUnknownOutcome}
	r.Summary = fmt.Sprintf("Task %s: destination %s may have performed the delivery at %s and it could not be confirmed; it is not sent again automatically; safe: check the destination for operation id %s, then resolve as completed (delivered) or failed (not delivered).", id, dest, when, t.OperationID())
	r.Known = append(r.Known,
		sentLine(t, dest),
		fmt.Sprintf("its outcome was recorded as unknown at %s", when),
		"readback: "+clip(why, MaxDetail),
		"the destination declares "+guarantees,
		"payload sha256 "+t.PayloadSHA256+" (the submitted deliver input's hash)",
	)
	r.Known = append(r.Known, lastError(t)...)
	r.Uncertain = append(r.Uncertain,
		fmt.Sprintf("whether %s performed the delivery for operation %s", dest, t.OperationID()),
		"if it did, a second send would deliver it twice: the destination does not deduplicate by operation id",
	)
	r.SafeActions = append(r.SafeActions,
		"resolve as completed: `taskledger review resolve "+id+" --outcome completed --note \"<evidence>\"` only with evidence from the destination (its record, log or reference for operation "+t.OperationID()+") that the delivery arrived",
		"resolve as failed: `taskledger review resolve "+id+" --outcome failed --note \"<reason>\"` ends the task without delivering; only when the destination shows it never arrived",
		"retry: `taskledger review retry "+id+"` re-sends the delivery with the same operation id; only when the destination shows it never arrived",
	)
	return r
}
