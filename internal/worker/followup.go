package worker

import (
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The follow-ups a settling write creates with it (package followup;
// ledger.WithFollowUps): the worker computes them from the task it holds
// and passes them to the ledger, which writes them in the same
// transaction. With h.Notify nil and no plan deliveries there are none,
// and the write is the one UpdateItem it always was.

// withFailed adds the requester's notification of a failure to a Fail's
// options.
func (h *Handler) withFailed(t *ledger.Task, o []ledger.WriteOption) []ledger.WriteOption {
	return append(o, ledger.WithFollowUps(h.Notify.Failed(t)))
}
