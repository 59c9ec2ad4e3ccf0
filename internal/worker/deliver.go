package worker

import (
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// step returns what performs t (doc.go, "Deliver tasks"): the provider
// for a generate task, the destination bound to t for a deliver task.
func (h *Handler) step(t *ledger.Task) provider.Provider {
	if t.Kind == deliver.Kind {
		return deliver.Bind(h.Destinations, deliver.Task{TaskID: t.TaskID, CorrelationID: t.CorrelationID, Input: t.Input, Provenance: deliver.ProvenanceOf(t)})
	}
	return h.Provider
}

// retrySafe reports whether t is a generation the deployment declared
// retry-safe (RetrySafeGeneration): repeating its call costs only money.
func (h *Handler) retrySafe(t *ledger.Task) bool {
	return h.RetrySafeGeneration && t.Kind != deliver.Kind
}

// repeatable reports whether re-sending t's operation cannot cause a
// second side effect (its step deduplicates), or may but costs only money
// (a retry-safe generation).
func (h *Handler) repeatable(t *ledger.Task) bool {
	return h.retrySafe(t) || provider.HonoursIdempotency(h.step(t))
}
