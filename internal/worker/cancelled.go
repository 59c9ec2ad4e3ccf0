package worker

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// cancelledInHand handles a Complete refused (fe) because a cancel while
// running fenced this very assignment after the provider had replied
// (ledger.CancelledAt): the provider acted, and the result in hand is the
// only copy of what it did. It is saved with ledger.CompleteCancelled (the
// task ends completed, error class cancel_too_late), repeated like every
// settling write. Discarding it would park the task unknown_outcome for a
// provider without readback, whose only remedy is a second call
// (adversarial review of issue 14). ok is false when the refusal is not
// such a cancel: the caller discards the result. A result that cannot be
// saved here is left to the reconciler's unknown rule (readback or review),
// which the cancel already set up.
func (h *Handler) cancelledInHand(ctx context.Context, rec events.SQSMessage, t *ledger.Task, c ledger.Completion, fe *ledger.FencedError, log *slog.Logger) (result, bool) {
	if !ledger.CancelledAt(fe, t.AssignmentVersion) {
		return result{}, false
	}
	err := h.save(ctx, rec, t, "complete after a cancel", func(o ...ledger.WriteOption) error {
		_, err := h.Ledger.CompleteCancelled(ctx, t.TaskID, t.AssignmentVersion, c, o...)
		return err
	}, log)
	var fe2 *ledger.FencedError
	switch {
	case err == nil:
		log.InfoContext(ctx, "cancel arrived after the provider replied: the result in hand was saved",
			"provider", c.Provider, "provider_ref", c.ProviderRef, "result_bytes", completionBytes(c))
		return ack(OutcomeCompleted), true
	case errors.As(err, &fe2):
		log.WarnContext(ctx, "completion after a cancel rejected; result discarded", "why", fe2.Why, "current_version", currentVersion(fe2))
		return ack(OutcomeFenced), true
	default:
		log.ErrorContext(ctx, "saving the result after a cancel failed; the reconciler's unknown rule decides", "error", err.Error(), "result_bytes", completionBytes(c))
		return ack(OutcomeFenced), true
	}
}
