package ledger

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// LapsedResolution is what CompleteLapsed records on the review item it
// resolves: the worker that saved the result and why (see package review).
type LapsedResolution struct {
	By   string // the worker (its lease owner), for the audit trail
	Note string // e.g. "the result of attempt 2 arrived after the park"
}

// CompleteLapsed saves the result of an attempt that returned after the
// reconciler had parked its task unknown_outcome: the worker was slow, not
// gone, its lease expired, the task went to unknown and — with no readback
// — to needs_review at the same assignment version. The assignment is still
// the caller's (no other attempt started: an operator's retry re-queues,
// and the next claim takes a new version), so the result it holds settles
// the uncertainty the open review item describes. Discarding it would leave
// the operator a "retry" that makes the provider act twice.
//
// One TransactWriteItems completes the task — conditioned on
// assignment_version = mine AND state = needs_review AND review_reason =
// unknown_outcome AND attribute_not_exists(result), the same fence as
// Complete with the parked state in place of running/unknown — and resolves
// its open unknown_outcome review item as completed (resolved_by r.By,
// resolution_note r.Note). Never one without the other: an operator who
// acted first wins, and the result is then not saved.
//
// Errors: *FencedError (Why not_running when the task is not parked
// unknown_outcome at this version, or its review item is no longer open;
// taken_over / already_completed / gone as for Complete), *ItemTooLargeError,
// *ThrottledError; an error for an empty r.By or r.Note.
func (l *Ledger) CompleteLapsed(ctx context.Context, taskID string, version int64, c Completion, r LapsedResolution) (*Task, error) {
	if strings.TrimSpace(r.By) == "" || strings.TrimSpace(r.Note) == "" {
		return nil, errors.New("ledger: CompleteLapsed needs the resolution's By and Note")
	}
	now := l.cfg.Now().UTC()
	u := newUpdate()
	l.off(u, StateCompleted, now)
	u.set("result", str(c.Result))
	u.set("completed_at", str(rfc3339(now)))
	if c.Provider != "" {
		u.set("provider", str(c.Provider))
	}
	if c.ProviderRef != "" {
		u.set("provider_ref", str(c.ProviderRef))
	}
	u.stamp(now)
	fence(u, version, StateNeedsReview)
	u.v("lapsed_reason", str(ReviewUnknownOutcome))
	u.cond(u.n("review_reason") + " = :lapsed_reason")
	u.cond("attribute_not_exists(" + u.n("result") + ")")
	nonce := newNonce()
	u.set("write_nonce", str(nonce))
	tin := u.input(l.cfg.TasksTable, taskID)
	if n := itemsize.UpdateLowerBound(tin.Key, *tin.UpdateExpression, tin.ExpressionAttributeNames, tin.ExpressionAttributeValues); n > itemsize.MaxItemBytes {
		return nil, &ItemTooLargeError{TaskID: taskID, Op: "complete lapsed", Bytes: n, ResultBytes: len(c.Result), Limit: itemsize.MaxItemBytes}
	}

	ru := newUpdate()
	ru.set("review_status", str(ReviewResolved))
	ru.set("resolved_at", str(rfc3339(now)))
	ru.set("resolved_by", str(r.By))
	ru.set("resolution", str(ResolutionCompleted))
	ru.set("resolution_note", str(truncate(r.Note, MaxNote)))
	ru.set("expires_at", num(l.retentionExpiry(now)))
	ru.v("open", str(ReviewOpen))
	ru.v("lapsed_reason", str(ReviewUnknownOutcome))
	ru.cond(ru.n("review_status") + " = :open")
	ru.cond(ru.n("reason") + " = :lapsed_reason")
	rin := ru.input(l.cfg.ReviewTable, taskID)

	// The table names are spelled out in the literals (not txUpdate), so
	// the IAM check of internal/templatetest can tell which tables the
	// worker writes.
	_, err := l.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{
				TableName:                 &l.cfg.TasksTable,
				Key:                       tin.Key,
				UpdateExpression:          tin.UpdateExpression,
				ConditionExpression:       tin.ConditionExpression,
				ExpressionAttributeNames:  tin.ExpressionAttributeNames,
				ExpressionAttributeValues: tin.ExpressionAttributeValues,
			}},
			{Update: &types.Update{
				TableName:                 &l.cfg.ReviewTable,
				Key:                       rin.Key,
				UpdateExpression:          rin.UpdateExpression,
				ConditionExpression:       rin.ConditionExpression,
				ExpressionAttributeNames:  rin.ExpressionAttributeNames,
				ExpressionAttributeValues: rin.ExpressionAttributeValues,
			}},
		},
	})
	if err == nil {
		return l.Get(ctx, taskID)
	}
	if !isTxConditionFailed(err) {
		// As in Park: a transaction whose reply was lost recognises its
		// own write by the nonce.
		if cur, ok := l.ownWrite(ctx, taskID, nonce, err); ok {
			return cur, nil
		}
		return nil, wrapErr("TransactWriteItems complete lapsed", err)
	}
	cur, gerr := l.Get(ctx, taskID)
	switch {
	case errors.Is(gerr, ErrNotFound):
		return nil, &FencedError{TaskID: taskID, Version: version, Why: "gone"}
	case gerr != nil:
		return nil, gerr
	case cur.WriteNonce == nonce:
		return cur, nil // our own write; its reply was lost
	}
	fe := &FencedError{TaskID: taskID, Version: version, Current: cur}
	switch {
	case cur.AssignmentVersion != version:
		fe.Why = "taken_over"
	case cur.State == StateCompleted || cur.Result != "":
		fe.Why = "already_completed"
	default:
		fe.Why = "not_running"
	}
	return nil, fe
}
