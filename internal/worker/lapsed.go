package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// parkedAtMine reports whether a settling write of t was refused because
// the reconciler had already parked the task unknown_outcome at this very
// assignment version: the worker was slow, not gone (its lease expired, the
// task went to unknown and, with no readback, was parked). What the
// provider answered settles that uncertainty.
func parkedAtMine(t *ledger.Task, fe *ledger.FencedError) bool {
	cur := fe.Current
	return cur != nil && cur.State == ledger.StateNeedsReview && cur.AssignmentVersion == t.AssignmentVersion &&
		cur.ReviewReason == ledger.ReviewUnknownOutcome
}

// lapsedPark reports whether a park of a result that cannot be saved (err,
// from parkResult) was refused because the task was parked unknown_outcome
// at this assignment version, and returns that park.
func lapsedPark(err error, version int64) (*ledger.Task, bool) {
	var ce *ledger.ConflictError
	if !errors.As(err, &ce) || ce.Task == nil {
		return nil, false
	}
	cur := ce.Task
	return cur, cur.State == ledger.StateNeedsReview && cur.AssignmentVersion == version && cur.ReviewReason == ledger.ReviewUnknownOutcome
}

// lapsed handles a Complete refused (fe) because the task was parked
// unknown_outcome at this assignment (parkedAtMine). The result it holds is
// saved with ledger.CompleteLapsed, which also resolves the open review
// item as completed by this worker; discarding it would leave the operator
// a "retry" that makes the provider act twice. The save is repeated like
// every settling write (save). A result that cannot be saved — too large,
// refused as invalid, or whose save kept failing — turns the review into
// result_too_large or result_not_saved with the facts (reviseLapsed).
// ok is false for any other refusal: the caller discards the result.
func (h *Handler) lapsed(ctx context.Context, rec events.SQSMessage, t *ledger.Task, c ledger.Completion, fe *ledger.FencedError, log *slog.Logger) (result, bool) {
	if !parkedAtMine(t, fe) {
		return result{}, false
	}
	x := review.Result{Provider: c.Provider, ProviderRef: c.ProviderRef, ResultBytes: completionBytes(c)}
	res := review.LapsedResult(t, x, h.Ledger.Now(), t.LeaseOwner)
	err := h.save(ctx, rec, t, "complete lapsed", func(o ...ledger.WriteOption) error {
		_, err := h.Ledger.CompleteLapsed(ctx, t.TaskID, t.AssignmentVersion, c, res, o...)
		return err
	}, log)
	var fe2 *ledger.FencedError
	var tl *ledger.ItemTooLargeError
	switch {
	case err == nil:
		log.InfoContext(ctx, "completed after the park: the lapsed result was saved and its unknown_outcome review resolved",
			"provider", c.Provider, "provider_ref", c.ProviderRef, "result_bytes", len(c.Result))
		return ack(OutcomeCompleted), true
	case errors.As(err, &fe2):
		log.WarnContext(ctx, "lapsed result rejected; result discarded", "why", fe2.Why, "current_version", currentVersion(fe2))
		return ack(OutcomeFenced), true
	case errors.As(err, &tl):
		x.ItemBytes, x.Limit = tl.Bytes, tl.Limit
		log.WarnContext(ctx, "lapsed result too large for the task item; not saved", "result_bytes", len(c.Result), "item_bytes", tl.Bytes, "limit_bytes", tl.Limit)
		return h.reviseLapsed(ctx, rec, t, fe.Current, review.ResultTooLarge(t, x), log), true
	default: // refused as invalid, or the repeats ran out
		log.ErrorContext(ctx, "saving the lapsed result failed; revising its review to result_not_saved", "error", err.Error(), "result_bytes", len(c.Result))
		return h.reviseLapsed(ctx, rec, t, fe.Current, review.ResultNotSaved(t, x, err), log), true
	}
}

// lapsedFailure handles a Fail (class permanent_input) or ScheduleRetry
// (class transient) refused (err) because the task was parked
// unknown_outcome at this assignment (parkedAtMine). The provider answered
// and did not act, so the open review's "may have performed (and billed)"
// is false: ledger.FailLapsed fails the task, ledger.RetryLapsed schedules
// the retry at notBefore, each resolving the review as this worker in the
// same transaction. ok is false for any other error or class: the caller
// goes on as before.
func (h *Handler) lapsedFailure(ctx context.Context, rec events.SQSMessage, t *ledger.Task, err error, c retrypolicy.Classification, perr error, msg string, notBefore time.Time, log *slog.Logger) (result, bool) {
	var fe *ledger.FencedError
	if !errors.As(err, &fe) || !parkedAtMine(t, fe) || (c.Class != retrypolicy.PermanentInput && c.Class != retrypolicy.Transient) {
		return result{}, false
	}
	now := h.Ledger.Now()
	f := review.FailureOf(c, perr, msg)
	if c.Class == retrypolicy.PermanentInput {
		res := review.LapsedRefused(t, h.step(t).Name(), f, now, t.LeaseOwner, "the task failed: its input was rejected")
		err = h.save(ctx, rec, t, "fail lapsed", func(o ...ledger.WriteOption) error {
			_, err := h.Ledger.FailLapsed(ctx, t.TaskID, t.AssignmentVersion, c.Class.String(), msg, res, o...)
			return err
		}, log)
		if r, done := h.settled(ctx, err, "fail lapsed", log); done {
			return r, true
		}
		log.InfoContext(ctx, "failed after the park: the input was rejected and the unknown_outcome review resolved")
		return ack(OutcomeFailed), true
	}
	res := review.LapsedRefused(t, h.step(t).Name(), f, now, t.LeaseOwner,
		"a retry is scheduled for "+notBefore.UTC().Format(time.RFC3339))
	err = h.save(ctx, rec, t, "retry lapsed", func(o ...ledger.WriteOption) error {
		_, err := h.Ledger.RetryLapsed(ctx, t.TaskID, t.AssignmentVersion, notBefore, c.Class.String(), msg, res, o...)
		return err
	}, log)
	if r, done := h.settled(ctx, err, "retry lapsed", log); done {
		return r, true
	}
	delay := notBefore.Sub(now)
	h.setVisibility(ctx, rec, delay, log)
	log.InfoContext(ctx, "retry scheduled after the park: the provider did not act and the unknown_outcome review resolved", "delay_ms", delay.Milliseconds())
	return retryRec(OutcomeRetried), true
}

// reviseLapsed replaces the open unknown_outcome review of the park (cur,
// at this assignment) with r: the provider acted, and r says what became of
// its result. It is one transaction (ledger.ReviseLapsed), repeated like
// every settling write; when that keeps failing, the review item alone is
// revised (ledger.ReviseLapsedReview), so what the worker knows reaches
// the operator even when the task item's summary cannot follow.
func (h *Handler) reviseLapsed(ctx context.Context, rec events.SQSMessage, t *ledger.Task, cur *ledger.Task, r ledger.Review, log *slog.Logger) result {
	err := h.save(ctx, rec, t, "revise lapsed review", func(o ...ledger.WriteOption) error {
		_, err := h.Ledger.ReviseLapsed(ctx, t.TaskID, t.AssignmentVersion, r, o...)
		return err
	}, log)
	var fe *ledger.FencedError
	switch {
	case err == nil:
		log.WarnContext(ctx, "parked for review: the lapsed result was not saved", "review_reason", r.Reason, "provider_ref", r.ProviderRef)
		return ack(OutcomeParked)
	case errors.As(err, &fe):
		log.WarnContext(ctx, "lapsed review revision rejected: the park changed; result discarded", "why", fe.Why, "current_version", currentVersion(fe))
		return ack(OutcomeFenced)
	}
	log.ErrorContext(ctx, "revising the lapsed review kept failing; revising the review item alone", "error", err.Error())
	err = h.save(ctx, rec, t, "revise lapsed review item", func(...ledger.WriteOption) error {
		return h.Ledger.ReviseLapsedReview(ctx, t.TaskID, cur.ParkCount, r)
	}, log)
	var ce *ledger.ConflictError
	switch {
	case err == nil:
		log.WarnContext(ctx, "review item revised: the lapsed result was not saved; the task item keeps its unknown_outcome summary",
			"review_reason", r.Reason, "provider_ref", r.ProviderRef)
		return ack(OutcomeParked)
	case errors.As(err, &ce):
		log.WarnContext(ctx, "lapsed review item revision rejected: the review changed; result discarded")
		return ack(OutcomeFenced)
	}
	log.ErrorContext(ctx, "revising the lapsed review item failed; the task stays parked unknown_outcome", "error", err.Error())
	return deferred
}
