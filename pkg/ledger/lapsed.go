package ledger

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// LapsedResolution is what a lapsed settlement records on the review item
// it resolves: the worker that settled it and what the provider answered.
type LapsedResolution struct {
	By   string // the worker (its lease owner), for the audit trail
	Note string // e.g. "the result of attempt 2 arrived after the park"
}

// A lapsed attempt returns after the reconciler parked its task
// unknown_outcome (the worker was slow, not gone; no readback) at the same
// assignment version: no other attempt started, so what the provider
// answered settles the open review. Each settlement writes the task item
// (ParkedAt the caller's version) and the still-open review item in one
// TransactWriteItems (an operator who acted first wins) and accepts
// WithNonce. Errors: *FencedError (Why not_running when the task is not so
// parked or its review is closed; else as for Complete), AWS errors such
// as *ThrottledError, which a repeat may pass; an error for an empty r.By
// or r.Note.

// CompleteLapsed saves the result of a lapsed attempt (completed, or
// awaiting_approval behind its gate) and resolves the review as completed:
// discarding it would leave the operator a "retry" that makes the provider
// act twice. Also *ItemTooLargeError (nothing sent).
func (l *Ledger) CompleteLapsed(ctx context.Context, taskID string, version int64, c Completion, r LapsedResolution, opts ...WriteOption) (*Task, error) {
	return l.lapsed(ctx, gated("complete_lapsed", c.ApprovalTTL > 0), taskID, version, r, ResolutionCompleted, opts, func(u *update, now time.Time) {
		l.completion(u, taskID, c, now)
	})
}

// FailLapsed records that the provider refused a lapsed attempt for a
// fault of its input (it did not act): the task fails with errClass and
// errMsg; the review is resolved as failed.
func (l *Ledger) FailLapsed(ctx context.Context, taskID string, version int64, errClass, errMsg string, r LapsedResolution, opts ...WriteOption) (*Task, error) {
	return l.lapsed(ctx, row("fail_lapsed"), taskID, version, r, ResolutionFailed, opts, func(u *update, now time.Time) {
		l.off(u, StateFailed, now)
		setError(u, errClass, errMsg)
	})
}

// RetryLapsed records that a lapsed attempt failed without the provider
// acting (a transient refusal, or a request never sent): retry_wait until
// notBefore, like ScheduleRetry, an earlier attempt's open outcome kept;
// the review is resolved as retry.
func (l *Ledger) RetryLapsed(ctx context.Context, taskID string, version int64, notBefore time.Time, errClass, errMsg string, r LapsedResolution, opts ...WriteOption) (*Task, error) {
	return l.lapsed(ctx, row("retry_lapsed"), taskID, version, r, ResolutionRetry, opts, func(u *update, now time.Time) {
		l.retryWait(u, taskID, notBefore)
		keepOpenOutcome(u)
		setError(u, errClass, errMsg)
		recordAttempt(u, OutcomeRetry, errClass, now.UnixMilli())
	})
}

// ReleaseLapsed records that no provider call was made under the parked
// assignment: queued again with its attempt given back and its error set
// like ReleaseUnknown's; the review is resolved as retry. Like
// ReleaseUnknown, refused once the attempt is no longer counted.
func (l *Ledger) ReleaseLapsed(ctx context.Context, taskID string, version int64, r LapsedResolution, opts ...WriteOption) (*Task, error) {
	return l.lapsed(ctx, row("release_lapsed"), taskID, version, r, ResolutionRetry, opts, func(u *update, now time.Time) {
		l.giveBack(u, taskID, now)
		voidLapse(u)
	})
}

// CancelLapsed ends cancelled a task parked unknown_outcome after a cancel
// while running (version: the park's, as the worker's refused write read
// it; cancel_version = version-1) when the worker of the cancelled
// assignment knows the provider did not act; why is the error message
// (class cancelled_while_running). The review is resolved as cancelled.
func (l *Ledger) CancelLapsed(ctx context.Context, taskID string, version int64, why string, r LapsedResolution, opts ...WriteOption) (*Task, error) {
	return l.lapsed(ctx, row("cancel_lapsed"), taskID, version, r, ResolutionCancelled, opts, func(u *update, now time.Time) {
		l.off(u, StateCancelled, now)
		setError(u, ErrorCancelledWhileRunning, why)
	})
}

// lapsed settles the park as tr (task update by set), resolving the review
// as resolution by r.
func (l *Ledger) lapsed(ctx context.Context, tr *Transition, taskID string, version int64, r LapsedResolution, resolution string, opts []WriteOption, set func(*update, time.Time)) (*Task, error) {
	if strings.TrimSpace(r.By) == "" || strings.TrimSpace(r.Note) == "" {
		return nil, fmt.Errorf("ledger: %s needs the resolution's By and Note", strings.Fields(tr.Method)[0])
	}
	now := l.cfg.Now().UTC()
	u := newUpdate().with(opts)
	set(u, now)
	return l.lapsedTx(ctx, tr, taskID, version, now, u, l.resolveUpdate(r, resolution, now))
}

// ReviseLapsed replaces the open unknown_outcome review of a lapsed attempt
// whose answer is known but could not be recorded as an outcome (a result
// too large, or a save refused or failing): the task stays needs_review
// with rev's reason, summary and error; the review item gets rev's
// explanation, provider_ref and error. rev needs Reason and Summary, and
// ParkCount (the task's, as read) when its safe actions carry ParkMark.
// The condition holds that park: a task leaves an unknown_outcome park only
// through a resolution, and re-enters one only at another version.
func (l *Ledger) ReviseLapsed(ctx context.Context, taskID string, version int64, rev Review, opts ...WriteOption) (*Task, error) {
	ru, err := reviseUpdate("ReviseLapsed", rev, rev.ParkCount)
	if err != nil {
		return nil, err
	}
	u := newUpdate().with(opts)
	explain(u, "review_", rev)
	return l.lapsedTx(ctx, row("revise_lapsed"), taskID, version, l.cfg.Now().UTC(), u, ru)
}

// ReviseLapsedReview is ReviseLapsed's review item alone, for when the
// transaction keeps failing: one UpdateItem of the open unknown_outcome
// review at park_count = parkCount (as read on the task), ParkMark in rev's
// safe actions becoming parkCount, so what an operator acts on says what is
// known. A repeat of a send that applied late succeeds; else
// *ConflictError, or AWS errors.
func (l *Ledger) ReviseLapsedReview(ctx context.Context, taskID string, parkCount int, rev Review) error {
	ru, err := reviseUpdate("ReviseLapsedReview", rev, parkCount)
	if err != nil {
		return err
	}
	row("revise_lapsed_review").reviewCondition(ru, parkCount)
	in := ru.input(l.cfg.ReviewTable, taskID)
	in.ReturnValues, in.ReturnValuesOnConditionCheckFailure = types.ReturnValueNone, ""
	if _, err := l.db.UpdateItem(ctx, in); !isConditionFailed(err) {
		return wrapErr("UpdateItem revise lapsed review", err)
	}
	if cur, gerr := l.GetReview(ctx, taskID); gerr == nil && cur.ReviewStatus == ReviewOpen &&
		cur.ParkCount == parkCount && cur.Reason == rev.Reason && cur.Summary == rev.Summary {
		return nil
	}
	return &ConflictError{TaskID: taskID, Op: "revise lapsed review", State: StateNeedsReview}
}

// resolveUpdate resolves the open unknown_outcome review item.
func (l *Ledger) resolveUpdate(r LapsedResolution, resolution string, now time.Time) *update {
	ru := newUpdate()
	ru.set("review_status", str(ReviewResolved))
	ru.set("resolved_at", str(rfc3339(now)))
	ru.set("resolved_by", str(r.By))
	ru.set("resolution", str(resolution))
	ru.set("resolution_note", str(truncate(r.Note, MaxNote)))
	ru.set("expires_at", num(now.Add(l.cfg.Retention).Unix()))
	return ru
}

// reviseUpdate rewrites the open review item's explanation with rev's, its
// safe actions naming park; op names the caller in the errors.
func reviseUpdate(op string, rev Review, park int) (*update, error) {
	if rev.Reason == "" || rev.Summary == "" {
		return nil, fmt.Errorf("ledger: %s needs the review's Reason and Summary", op)
	}
	if park <= 0 && slices.ContainsFunc(rev.SafeActions, func(a string) bool { return strings.Contains(a, ParkMark) }) {
		return nil, fmt.Errorf("ledger: %s needs the park its review's commands decide", op)
	}
	rev.SafeActions = withPark(rev.SafeActions, park)
	nilToEmpty(&rev)
	ru := newUpdate()
	explain(ru, "", rev)
	for attr, list := range map[string][]string{"known": rev.Known, "uncertain": rev.Uncertain, "safe_actions": rev.SafeActions} {
		av, err := attributevalue.Marshal(list)
		if err != nil {
			return nil, fmt.Errorf("ledger: encode review %s: %w", attr, err)
		}
		ru.set(attr, av)
	}
	return ru, nil
}

// explain sets rev's reason and summary (prefix names the task's
// attributes), provider_ref and error on u.
func explain(u *update, prefix string, rev Review) {
	u.set(prefix+"reason", str(rev.Reason))
	u.set(prefix+"summary", str(rev.Summary))
	if rev.ProviderRef != "" {
		u.set("provider_ref", str(rev.ProviderRef))
	}
	if rev.ErrorClass != "" {
		setError(u, rev.ErrorClass, rev.ErrorMessage)
	}
}

// reviewCondition adds tr's review-item guard to ru, one conjunct per AND;
// parkCount is the park's, where the guard names it.
func (tr *Transition) reviewCondition(ru *update, parkCount int) {
	c := &Call{Parks: parkCount}
	for _, g := range tr.Guards {
		if g.kind == 'v' {
			for _, e := range strings.Split(g.Expr, " AND ") {
				ru.conds = append(ru.conds, ru.placeholders(e, c.value))
			}
		}
	}
}

// lapsedTx sends u as tr with ru, the open review item's update, in one
// TransactWriteItems.
func (l *Ledger) lapsedTx(ctx context.Context, tr *Transition, taskID string, version int64, now time.Time, u, ru *update) (*Task, error) {
	tr.reviewCondition(ru, 0)
	u.tx = []types.TransactWriteItem{{Update: txUpdate(&types.Update{TableName: &l.cfg.ReviewTable}, ru.input(l.cfg.ReviewTable, taskID))}}
	u.setNonce() // before the size check (update.fits): the nonce is part of the item
	return l.write(ctx, strings.ReplaceAll(strings.TrimSuffix(tr.Op, "_gated"), "_", " "), tr, taskID, &Call{Now: now, Version: version}, u)
}

// ParkedAt reports whether t is parked unknown_outcome at assignment
// version (the lapsed settlements' condition on the task item).
func ParkedAt(t *Task, version int64) bool {
	return row("fail_lapsed").Allows(t, Call{Version: version})
}
