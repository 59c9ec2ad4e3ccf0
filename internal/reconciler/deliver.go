package reconciler

import (
	"errors"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A deliver task (DESIGN §10) is reconciled by the generate rules with its
// destination in the provider's place (package deliver): an expired lease
// of a non-idempotent destination goes to unknown (never re-queued blindly),
// and an unknown delivery is read back with the destination's readback and
// destination.Decide's rule — found completes it with the read-back
// receipt, a credible "not found" re-queues it, a lagging readback is read
// again every run until the age budget ends, and anything else parks it
// unknown_outcome with a review saying what the readback found.

// step returns what performs t: the provider, or t's destination.
func (h *Handler) step(t *ledger.Task) contract.Provider {
	if t.Kind == deliver.Kind {
		return deliver.Bind(h.Destinations, deliver.Task{TaskID: t.TaskID, CorrelationID: t.CorrelationID, Input: t.Input, Provenance: deliver.ProvenanceOf(t)})
	}
	return h.Provider
}

// unknownReview is the unknown_outcome review of t: the delivery wording
// for a deliver task, the generation wording otherwise.
func (h *Handler) unknownReview(t *ledger.Task, name string, at time.Time, why string) ledger.Review {
	if t.Kind != deliver.Kind {
		return review.UnknownOutcome(t, name, at, why)
	}
	g := "no guarantees (the destination is not configured)"
	if s, ok := h.step(t).(*deliver.Step); ok {
		g = s.Guarantees().String()
	}
	return review.DeliveryUnknownOutcome(t, name, g, at, why)
}

// readbackWhy words a readback that ended without a final answer.
func readbackWhy(t *ledger.Task, err error) string {
	if t.Kind == deliver.Kind && errors.Is(err, deliver.ErrNotYetVisible) {
		return "the destination never showed the delivery before the age budget ended, and its absence is not credible evidence: " + err.Error()
	}
	return "readback kept failing until the age budget ended: " + err.Error()
}
