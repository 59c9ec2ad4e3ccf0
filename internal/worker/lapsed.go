package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// known is what the worker knows of its attempt, with what the transition
// that records it needs (doc.go, "Settling after the lease is lost").
type known struct {
	kind      knowledge
	c         ledger.Completion          // knowResult
	review    ledger.Review              // knowUnsaved, knowRefusedPark: the worker's own park
	class     retrypolicy.Classification // the refusals
	perr      error                      // knowRefusedInput: the provider's error
	msg       string                     // the refusals: the error message stored
	notBefore time.Time                  // knowRefusedRetry
}

// why is the error message of a task ended cancelled by what the worker knew.
func (k known) why() string {
	switch k.kind {
	case knowResult:
		return "cancelled while running after the provider replied: the task needs an approval, so the result was not kept and nothing can be approved or delivered"
	case knowNoCall:
		return "cancelled while running before the provider call; no call was made"
	case knowCharged:
		return "cancelled while running; the generation is retry-safe, so its call was abandoned and charged"
	}
	return fmt.Sprintf("cancelled while running; the provider refused the call (%s), so it did not act", k.class.Class)
}

// settleRefused sends what settle decides when err refused a write settling
// t's assignment. ok=false when settle sends nothing, err is no refusal or kn
// is nil: the caller reports its own outcome.
func (h *Handler) settleRefused(ctx context.Context, rec events.SQSMessage, t *ledger.Task, err error, kn *known, log *slog.Logger) (result, bool) {
	var fe *ledger.FencedError
	var ce *ledger.ConflictError
	var read *ledger.Task
	switch {
	case kn != nil && errors.As(err, &fe):
		read = fe.Current
	case kn != nil && errors.As(err, &ce):
		read = ce.Task
	default:
		return result{}, false
	}
	if d := settle(read, t.AssignmentVersion, kn.kind); d != sendNothing {
		return h.send(ctx, rec, t, read, d, *kn, log), true
	}
	return result{}, false
}

// send writes d for t's assignment (read: the task as the refusal found
// it), saved like every settling write.
func (h *Handler) send(ctx context.Context, rec events.SQSMessage, t, read *ledger.Task, d decision, kn known, log *slog.Logger) result {
	v, c := t.AssignmentVersion, kn.c
	x := review.Result{Provider: c.Provider, ProviderRef: c.ProviderRef, ResultBytes: completionBytes(c)}
	switch d {
	case sendParkUnknown:
		log.InfoContext(ctx, "the lease lapsed to unknown at this assignment; parking from unknown")
		return h.park(ctx, rec, t, ledger.ParkOptions{State: ledger.StateUnknown, Version: v}, kn.review, &kn, log)
	case sendReviseLapsed:
		return h.reviseLapsed(ctx, rec, t, read, kn.review, log)
	case sendCompleteCancelled, sendCompleteCancelPark:
		// The provider acted and billed: the result is kept (cancel_too_late).
		res := review.LapsedResult(t, x, h.Ledger.Now(), t.LeaseOwner)
		res.Note = "a cancel while running landed after the provider replied; " + res.Note
		err := h.save(ctx, rec, t, "complete after a cancel", func(o ...ledger.WriteOption) (_ *ledger.Task, err error) {
			if d == sendCompleteCancelled {
				_, err = h.Ledger.CompleteCancelled(ctx, t.TaskID, read.AssignmentVersion, c, o...)
			} else {
				_, err = h.Ledger.CompleteLapsed(ctx, t.TaskID, read.AssignmentVersion, c, res, o...)
			}
			return nil, err
		}, log)
		if err != nil {
			log.WarnContext(ctx, "saving the result after a cancel failed; result discarded, the reconciler's rule decides", "error", err.Error(), "result_bytes", x.ResultBytes)
			return ack(OutcomeFenced)
		}
		log.InfoContext(ctx, "cancel arrived after the provider replied: the result in hand was saved",
			"provider", c.Provider, "provider_ref", c.ProviderRef, "result_bytes", x.ResultBytes)
		return ack(OutcomeCompleted)
	case sendCancelUnknown, sendCancelLapsed:
		why := kn.why()
		res := ledger.LapsedResolution{By: "worker " + t.LeaseOwner, Note: "resolved by the worker: " + why}
		err := h.save(ctx, rec, t, "cancel by what the worker knew", func(o ...ledger.WriteOption) (_ *ledger.Task, err error) {
			if d == sendCancelUnknown {
				_, err = h.Ledger.CancelUnknown(ctx, t.TaskID, read.AssignmentVersion, why)
			} else {
				_, err = h.Ledger.CancelLapsed(ctx, t.TaskID, read.AssignmentVersion, why, res, o...)
			}
			return nil, err
		}, log)
		if err != nil {
			log.WarnContext(ctx, "ending the cancelled task failed; the reconciler's rule decides", "error", err.Error())
		} else {
			log.InfoContext(ctx, "cancelled while running; ended by what the worker knew", "why", why)
		}
		return ack(OutcomeFenced)
	case sendCompleteLapsed:
		// Discarding the result would leave the operator a "retry" that
		// makes the provider act twice.
		res := review.LapsedResult(t, x, h.Ledger.Now(), t.LeaseOwner)
		err := h.save(ctx, rec, t, "complete lapsed", func(o ...ledger.WriteOption) (*ledger.Task, error) {
			return h.Ledger.CompleteLapsed(ctx, t.TaskID, v, c, res, o...)
		}, log)
		var fe *ledger.FencedError
		switch {
		case err == nil:
			log.InfoContext(ctx, "completed after the park: the lapsed result was saved and its unknown_outcome review resolved",
				"provider", c.Provider, "provider_ref", c.ProviderRef, "result_bytes", x.ResultBytes)
			return ack(OutcomeCompleted)
		case errors.As(err, &fe):
			log.WarnContext(ctx, "lapsed result rejected; result discarded", "why", fe.Why, "current_version", currentVersion(fe))
			return ack(OutcomeFenced)
		}
		return h.reviseLapsed(ctx, rec, t, read, unsavedReview(ctx, t, x, err, log), log)
	case sendFailLapsed:
		// The provider did not act: the review's "may have performed" is false.
		res := review.LapsedRefused(t, h.step(t).Name(), review.FailureOf(kn.class, kn.perr, kn.msg), h.Ledger.Now(), t.LeaseOwner,
			"the task failed: its input was rejected")
		if r, done := h.saveAfterError(ctx, rec, t, "fail lapsed", false, nil, func(o ...ledger.WriteOption) (*ledger.Task, error) {
			return h.Ledger.FailLapsed(ctx, t.TaskID, v, kn.class.Class.String(), kn.msg, res, append(o, ledger.WithFollowUps(h.Notify.Failed(t)))...)
		}, log); done {
			return r
		}
		log.InfoContext(ctx, "failed after the park: the input was rejected and the unknown_outcome review resolved")
		return ack(OutcomeFailed)
	case sendRetryLapsed:
		now := h.Ledger.Now()
		res := review.LapsedRefused(t, h.step(t).Name(), review.FailureOf(kn.class, kn.perr, kn.msg), now, t.LeaseOwner,
			"a retry is scheduled for "+kn.notBefore.UTC().Format(time.RFC3339))
		if r, done := h.saveAfterError(ctx, rec, t, "retry lapsed", false, nil, func(o ...ledger.WriteOption) (*ledger.Task, error) {
			return h.Ledger.RetryLapsed(ctx, t.TaskID, v, kn.notBefore, kn.class.Class.String(), kn.msg, res, o...)
		}, log); done {
			return r
		}
		delay := kn.notBefore.Sub(now)
		h.setVisibility(ctx, rec, delay, log)
		log.InfoContext(ctx, "retry scheduled after the park: the provider did not act and the unknown_outcome review resolved", "delay_ms", delay.Milliseconds())
		return retryRec(OutcomeRetried)
	}
	return ack(OutcomeFenced) // sendNothing; the give-backs are uncalled's
}

// uncalled settles a write of the no-call path (a release, the call-start
// mark's repeat, an admission wait, the renewal before the call) refused
// with the task as read, by knowNoCall: only this worker could have called
// under its assignment. Left alone, a marked assignment would be parked
// saying its call was started. d is what was sent; err, a give-back's failure.
func (h *Handler) uncalled(ctx context.Context, rec events.SQSMessage, t, read *ledger.Task, log *slog.Logger) (d decision, err error) {
	v := t.AssignmentVersion
	var op, done string
	var write func(o ...ledger.WriteOption) (*ledger.Task, error)
	switch d = settle(read, v, knowNoCall); d {
	case sendNothing:
		return d, nil
	case sendReleaseRequeued:
		op, done = "release requeued", "the lapsed lease was re-queued before any provider call; the attempt is given back and its lapse voided"
		write = func(o ...ledger.WriteOption) (*ledger.Task, error) {
			return h.Ledger.ReleaseRequeued(ctx, t.TaskID, v, o...)
		}
	case sendReleaseUnknown:
		op, done = "release unknown", "the lease had lapsed to unknown before any provider call; released from unknown"
		write = func(o ...ledger.WriteOption) (*ledger.Task, error) {
			return h.Ledger.ReleaseUnknown(ctx, t.TaskID, v, o...)
		}
	case sendReleaseLapsed:
		op, done = "release lapsed", "the task was parked unknown_outcome before any provider call; the review is resolved and the task released"
		res := ledger.LapsedResolution{By: "worker " + t.LeaseOwner, Note: fmt.Sprintf(
			"resolved by the worker: attempt %d of %d made no provider call (its lease lapsed before the call, and the task was parked before the worker could give it back); the attempt is given back and the task re-queued",
			t.Attempts, t.MaxAttempts)}
		write = func(o ...ledger.WriteOption) (*ledger.Task, error) {
			return h.Ledger.ReleaseLapsed(ctx, t.TaskID, v, res, o...)
		}
	default:
		h.send(ctx, rec, t, read, d, known{kind: knowNoCall}, log)
		return d, nil
	}
	if err = h.save(ctx, rec, t, op, write, log); err == nil {
		log.WarnContext(ctx, done)
		return d, nil
	}
	// Refused because the task moved on: settled again from there — a
	// give-back only further on (giveBackStage), so none repeats; a cancel
	// while running ended by what this worker knows, as from a first read.
	var fe *ledger.FencedError
	if !errors.As(err, &fe) {
		return d, err
	}
	if next := settle(fe.Current, v, knowNoCall); next != sendNothing && (!next.givesBack() || giveBackStage[next] > giveBackStage[d]) {
		return h.uncalled(ctx, rec, t, fe.Current, log)
	}
	return d, err
}

// giveBackStage orders the give-backs as a lapsed lease's task moves on
// (never back): queued at mine (re-queued), then unknown (the spent
// budget's readback), then its park.
var giveBackStage = map[decision]int{sendReleaseRequeued: 1, sendReleaseUnknown: 2, sendReleaseLapsed: 3}

// uncalledRefusal settles by uncalled, and logs, what (a no-call write)
// refused with fe: deferred when given back (or that failed), else fenced.
func (h *Handler) uncalledRefusal(ctx context.Context, rec events.SQSMessage, t *ledger.Task, what string, fe *ledger.FencedError, log *slog.Logger) result {
	d, err := h.uncalled(ctx, rec, t, fe.Current, log)
	switch {
	case d.givesBack() && err != nil:
		log.ErrorContext(ctx, what+" refused by the lease's expiry and the release failed; provider not called", "release_error", err.Error())
	case d == sendNothing:
		log.WarnContext(ctx, what+" rejected: the assignment was fenced; provider not called", "why", fe.Why, "current_version", currentVersion(fe))
	}
	if d.givesBack() {
		return deferred
	}
	return ack(OutcomeFenced)
}

// reviseLapsed replaces the open unknown_outcome review of the park (cur)
// with r, which says what became of the result; failing that, the review
// item alone, so what the worker knows reaches the operator.
func (h *Handler) reviseLapsed(ctx context.Context, rec events.SQSMessage, t *ledger.Task, cur *ledger.Task, r ledger.Review, log *slog.Logger) result {
	r.ParkCount = cur.ParkCount // the park revised: its suggested commands decide it
	err := h.save(ctx, rec, t, "revise lapsed review", func(o ...ledger.WriteOption) (*ledger.Task, error) {
		return h.Ledger.ReviseLapsed(ctx, t.TaskID, t.AssignmentVersion, r, o...)
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
	err = h.save(ctx, rec, t, "revise lapsed review item", func(...ledger.WriteOption) (*ledger.Task, error) {
		return nil, h.Ledger.ReviseLapsedReview(ctx, t.TaskID, cur.ParkCount, r)
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
