package worker

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// needsCallMark reports whether the provider call must be preceded by the
// call-start mark: the provider does not deduplicate by operation id.
// Without the mark the reconciler could not tell a worker that died after
// its claim from one whose call is still running (a worker whose renewals
// fail lets its call run on): it would park the first as "may have acted",
// and — with a readback — could not trust a "not found" until the call
// timeout had passed.
func (h *Handler) needsCallMark(t *ledger.Task) bool {
	return !h.honoursIdempotencyOf(t)
}

// markCallStarted writes the call-start mark (ledger.MarkCallStarted)
// before the provider call when needsCallMark, repeating it with the same
// nonce (save). ok=false means the provider must not be called and r is the
// record's result: fenced (another assignment owns the task) is
// acknowledged; any other failure gives the assignment and its attempt back
// (no call was made) and defers the message.
func (h *Handler) markCallStarted(ctx context.Context, rec events.SQSMessage, t *ledger.Task, log *slog.Logger) (r result, ok bool) {
	if !h.needsCallMark(t) {
		return result{}, true
	}
	err := h.save(ctx, rec, t, "call_started", func(o ...ledger.WriteOption) error {
		_, err := h.Ledger.MarkCallStarted(ctx, t.TaskID, t.AssignmentVersion, h.lease(), append(o, ledger.WithAgeDeadline(t.DeadlineMs))...)
		return err
	}, log)
	if err == nil {
		return result{}, true
	}
	var fe *ledger.FencedError
	if errors.As(err, &fe) {
		log.WarnContext(ctx, "call-start mark rejected: the assignment was fenced; provider not called", "why", fe.Why, "current_version", currentVersion(fe))
		return ack(OutcomeFenced), false
	}
	if rerr := h.release(ctx, rec, t, log); rerr != nil {
		log.ErrorContext(ctx, "call-start mark failed and the release failed; provider not called, the lease will expire",
			"error", err.Error(), "release_error", rerr.Error())
	} else {
		log.WarnContext(ctx, "call-start mark failed; released the task and its attempt, provider not called", "error", err.Error())
	}
	h.setVisibility(ctx, rec, 0, log)
	return deferred, false
}
