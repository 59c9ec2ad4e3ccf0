package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// A cancel while running (ledger.CancelRunning) fences the worker's
// assignment version v: the task is unknown at v+1 with cancel_version = v
// until the reconciler decides. When the fenced worker already holds the
// provider's answer, the outcome is not unknown, and what it holds decides
// it (adversarial review of issue 14):
//
//   - a reply, ungated task: saved (ledger.CompleteCancelled: completed,
//     error class cancel_too_late) — the provider acted and billed, and
//     parking it unknown_outcome without readback leaves only a second call;
//     also when the reconciler parked it unknown_outcome at v+1 first
//     (ledger.CompleteLapsed at v+1, resolving that review);
//   - a reply, gated task (approval required): ended cancelled without the
//     result (ledger.CancelUnknown) — opening the gate after the caller's
//     cancel would let an approval start deliveries nobody wants, and
//     nothing has used the result yet;
//   - a definite refusal (never sent, the input or the configuration
//     refused, throttled: retrypolicy.Refused — not a 5xx, which may hide a
//     generation): ended cancelled — the provider did not act;
//   - no call at all (the cancel fenced the assignment between the
//     call-start mark and the call: cancelledUncalled): ended cancelled;
//   - both also once the reconciler parked the cancel unknown_outcome
//     (ledger.CancelLapsed, resolving its review: cancelledKnown).
//
// Anything else is left to the reconciler's unknown rule, which the cancel
// set up.

// cancelledInHand handles a Complete refused (fe) by a cancel of this very
// assignment after the provider had replied. ok is false when the refusal
// is not such a cancel: the caller discards the result.
func (h *Handler) cancelledInHand(ctx context.Context, rec events.SQSMessage, t *ledger.Task, c ledger.Completion, fe *ledger.FencedError, log *slog.Logger) (result, bool) {
	v := t.AssignmentVersion
	switch {
	case ledger.CancelledAt(fe, v) && t.ApprovalTTL() > 0:
		return h.cancelFenced(ctx, rec, t, "cancelled while running after the provider replied: the task needs an approval, so the result was not kept and nothing can be approved or delivered", log), true
	case ledger.CancelledAt(fe, v):
		err := h.save(ctx, rec, t, "complete after a cancel", func(o ...ledger.WriteOption) error {
			_, err := h.Ledger.CompleteCancelled(ctx, t.TaskID, v, c, o...)
			return err
		}, log)
		return h.savedAfterCancel(ctx, c, err, log), true
	case cancelParkedAt(fe, v) && t.ApprovalTTL() <= 0:
		x := review.Result{Provider: c.Provider, ProviderRef: c.ProviderRef, ResultBytes: completionBytes(c)}
		res := review.LapsedResult(t, x, h.Ledger.Now(), t.LeaseOwner)
		res.Note = "a cancel while running landed after the provider replied; " + res.Note
		err := h.save(ctx, rec, t, "complete a cancelled park", func(o ...ledger.WriteOption) error {
			_, err := h.Ledger.CompleteLapsed(ctx, t.TaskID, v+1, c, res, o...)
			return err
		}, log)
		return h.savedAfterCancel(ctx, c, err, log), true
	}
	return result{}, false
}

// cancelParkedAt reports whether fe is a refusal because the reconciler
// parked a cancel of exactly version v unknown_outcome before the worker's
// save (the park is at v+1).
func cancelParkedAt(fe *ledger.FencedError, v int64) bool {
	cur := fe.Current
	return cur != nil && cur.State == ledger.StateNeedsReview && cur.ReviewReason == ledger.ReviewUnknownOutcome &&
		cur.CancelVersion == v && cur.AssignmentVersion == v+1 && !cur.HasResult()
}

func (h *Handler) savedAfterCancel(ctx context.Context, c ledger.Completion, err error, log *slog.Logger) result {
	var fe2 *ledger.FencedError
	switch {
	case err == nil:
		log.InfoContext(ctx, "cancel arrived after the provider replied: the result in hand was saved",
			"provider", c.Provider, "provider_ref", c.ProviderRef, "result_bytes", completionBytes(c))
		return ack(OutcomeCompleted)
	case errors.As(err, &fe2):
		log.WarnContext(ctx, "completion after a cancel rejected; result discarded", "why", fe2.Why, "current_version", currentVersion(fe2))
		return ack(OutcomeFenced)
	default:
		log.ErrorContext(ctx, "saving the result after a cancel failed; the reconciler's unknown rule decides", "error", err.Error(), "result_bytes", completionBytes(c))
		return ack(OutcomeFenced)
	}
}

// cancelledRefusal handles a Fail or a ScheduleRetry refused (err) by a
// cancel of this very assignment after the provider refused the call (for
// its input, or transiently): the provider did not act, so the task ends
// cancelled. ok is false otherwise.
func (h *Handler) cancelledRefusal(ctx context.Context, rec events.SQSMessage, t *ledger.Task, err error, c retrypolicy.Classification, log *slog.Logger) (result, bool) {
	var fe *ledger.FencedError
	if !errors.As(err, &fe) {
		return result{}, false
	}
	return h.cancelledKnown(ctx, rec, t, fe.Current, refusedWhy(c), log)
}

// refusedWhy is the error message of a task a cancel fenced after its
// call was refused (c).
func refusedWhy(c retrypolicy.Classification) string {
	return fmt.Sprintf("cancelled while running; the provider refused the call (%s), so it did not act", c.Class)
}

// cancelledKnown ends the task cancelled (why) when a cancel while running
// fenced exactly this assignment and the worker knows the provider did not
// act under it: while the task is still unknown at the cancel's version
// (cancelFenced), and also once the reconciler's cancel rule parked it
// unknown_outcome there (ledger.CancelLapsed, resolving that review: it
// says the call may have acted). cur is the task as the refused write
// found it; ok=false when it shows no such cancel.
func (h *Handler) cancelledKnown(ctx context.Context, rec events.SQSMessage, t *ledger.Task, cur *ledger.Task, why string, log *slog.Logger) (result, bool) {
	v := t.AssignmentVersion
	fe := &ledger.FencedError{TaskID: t.TaskID, Version: v, Current: cur}
	switch {
	case cur == nil:
		return result{}, false
	case ledger.CancelledAt(fe, v):
		return h.cancelFenced(ctx, rec, t, why, log), true
	case !cancelParkedAt(fe, v):
		return result{}, false
	}
	res := ledger.LapsedResolution{By: "worker " + t.LeaseOwner, Note: "resolved by the worker: " + why}
	err := h.save(ctx, rec, t, "cancel a cancelled park", func(o ...ledger.WriteOption) error {
		_, err := h.Ledger.CancelLapsed(ctx, t.TaskID, v+1, why, res, o...)
		return err
	}, log)
	if err != nil {
		log.WarnContext(ctx, "ending the cancelled park failed; it stays for review", "error", err.Error())
		return ack(OutcomeFenced), true
	}
	log.InfoContext(ctx, "cancelled while running; the park ended by what the worker knew", "why", why)
	return ack(OutcomeFenced), true
}

// cancelFenced ends the task cancelled at the cancel's version (v+1).
func (h *Handler) cancelFenced(ctx context.Context, rec events.SQSMessage, t *ledger.Task, why string, log *slog.Logger) result {
	err := h.save(ctx, rec, t, "cancel after a cancel while running", func(...ledger.WriteOption) error {
		_, err := h.Ledger.CancelUnknown(ctx, t.TaskID, t.AssignmentVersion+1, why)
		return err
	}, log)
	if err != nil {
		log.WarnContext(ctx, "ending the cancelled task failed; the reconciler's unknown rule decides", "error", err.Error())
		return ack(OutcomeFenced)
	}
	log.InfoContext(ctx, "cancelled while running; ended by what the worker knew", "why", why)
	return ack(OutcomeFenced)
}
