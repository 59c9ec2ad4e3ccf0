package review

import (
	"fmt"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// cancelLine is sentLine for a task cancelled while running
// (ledger.CancelRunning): the cancel fenced the attempt, and whether its
// call had reached the provider is what remains uncertain.
func cancelLine(t *ledger.Task, provider string) string {
	started := "may have been sent"
	if t.CallStartedVersion > 0 && t.CallStartedVersion == t.CancelVersion {
		started = "had been started (its worker recorded the start)"
	}
	return fmt.Sprintf("attempt %d of %d was cancelled while running (a cancel request fenced its worker); its call to %s with operation id %s %s",
		t.Attempts, t.MaxAttempts, provider, t.OperationID(), started)
}

// cancelledReview adapts an unknown_outcome review to a task its caller
// cancelled while it was running: the summary says so, and re-running it
// is no longer offered first (the caller asked for it not to run).
func cancelledReview(r *ledger.Review, id string) {
	r.Summary = fmt.Sprintf("Task %s was cancelled by its caller while its provider call may already have been made, and the provider cannot be read back; safe: resolve as failed (cancelled), or as completed with evidence that the provider acted.", id)
	r.SafeActions = []string{
		resolveFailed(id) + " (the caller cancelled it)",
		resolveCompleted(id),
	}
}
