package ledger

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// OperatorAction is an operator's decision on an open review item.
type OperatorAction struct {
	Resolution string // ResolutionRetry, ResolutionCompleted or ResolutionFailed
	Note       string // the evidence or explanation (required for completed/failed)
	By         string // the operator (IAM user, email); required
	ParkCount  int    // the park (park_count) it was decided on; 0: the review open now
}

// ErrInvalidAction is returned (wrapped) for a malformed operator action.
var ErrInvalidAction = errors.New("ledger: invalid operator action")

// MaxNote caps operator notes (bytes).
const MaxNote = 2000

// Act applies an operator action to taskID's open review item and its parked
// task in one transaction (rows operator_*): retry queues the task with a fresh
// budget (the caller sends its SQS message); completed and failed end it, the
// note its evidence or error. Repeated, an action is a replay (replayed=true);
// another on a resolved item or an earlier park is a *ConflictError, but a
// retry of an ungated task (only a retry leaves it for a later park) is a
// replay. A poison item has no task: completed or failed just close it.
func (l *Ledger) Act(ctx context.Context, taskID string, a OperatorAction) (r *Review, t *Task, replayed bool, err error) {
	if err := a.validate(); err != nil {
		return nil, nil, false, err
	}
	r, err = l.GetReview(ctx, taskID)
	if err != nil {
		return nil, nil, false, err
	}
	pc := cmp.Or(a.ParkCount, r.ParkCount)
	if r.ReviewStatus == ReviewResolved || r.ParkCount != pc {
		return l.replayOrConflict(ctx, r, a, pc)
	}
	poison := r.Reason == ReviewPoisonMessage
	if poison && a.Resolution == ResolutionRetry {
		return nil, nil, false, fmt.Errorf("%w: a poison message has no task to retry; resolve it as completed or failed", ErrInvalidAction)
	}
	now := l.cfg.Now().UTC()
	ru := l.resolveUpdate(LapsedResolution{By: a.By, Note: a.Note}, a.Resolution, now)
	row("operator_"+a.Resolution).reviewCondition(ru, pc)
	items := []types.TransactWriteItem{{Update: txUpdate(&types.Update{TableName: &l.cfg.ReviewTable}, ru.input(l.cfg.ReviewTable, taskID))}}
	if !poison {
		cur, err := l.Get(ctx, taskID)
		if err != nil {
			return nil, nil, false, err
		}
		if a.Resolution == ResolutionCompleted && !gGateOff.holds(cur, nil) {
			return nil, nil, false, fmt.Errorf("%w: task %s has an approval gate and completes only through an approval; resolve it as retry (generated again, it awaits approval anew) or failed", ErrInvalidAction, taskID)
		}
		tu := newUpdate()
		switch a.Resolution {
		case ResolutionRetry:
			l.giveBack(tu, taskID, now)
			tu.set("budget_start_ms", num(now.UnixMilli()))
			tu.set("deadline_ms", num(now.UnixMilli()+cur.MaxAgeMs))
			// The task starts clean (the review keeps its error) and a gated task's approval starts
			// over; the round and withdrawn deliveries stay, so new deliveries get new keys.
			tu.remove("review_reason", "review_summary", "result", "result_ref", "lease_owner", "lease_until", "not_before",
				"error_class", "error_message", "result_sha256", "generated_result", "generated_sha256", "generated_result_ref",
				"approval_state", "approval_deadline_ms", "approval_sha256", "approval_basis_sha256", "decided_by",
				"decided_at", "approval_note", "approval_policy", "delivery_ids")
		case ResolutionCompleted: // the gate is off (checked above)
			ev, _ := json.Marshal(map[string]any{"operator_resolution": map[string]string{
				"resolved_by": a.By, "evidence": a.Note, "resolved_at": rfc3339(now)}})
			l.completion(tu, taskID, Completion{Result: string(ev)}, now)
			tu.remove("result_ref")
		case ResolutionFailed:
			l.off(tu, StateFailed, now)
			setError(tu, "operator_failed", a.Note)
		}
		tu.stamp(now)
		tu.setNonce()
		row("operator_"+a.Resolution).condition(tu, &Call{Now: now, Version: cur.AssignmentVersion})
		items = append(items, types.TransactWriteItem{Update: txUpdate(&types.Update{TableName: &l.cfg.TasksTable}, tu.input(l.cfg.TasksTable, taskID))})
	}
	if _, err = l.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
		if !isTxConditionFailed(err) {
			return nil, nil, false, wrapErr("TransactWriteItems operator "+a.Resolution, err)
		}
		// Someone acted in between: decide from what is there now.
		if r, err = l.GetReview(ctx, taskID); err != nil {
			return nil, nil, false, err
		}
		if r.ReviewStatus == ReviewResolved || r.ParkCount != pc {
			return l.replayOrConflict(ctx, r, a, pc)
		}
		cur, _ := l.Get(ctx, taskID)
		return nil, nil, false, conflict("operator "+a.Resolution, taskID, cur)
	}
	r, err = l.GetReview(ctx, taskID)
	if err != nil || poison {
		return r, nil, false, err
	}
	t, err = l.Get(ctx, taskID)
	return r, t, false, err
}

// replayOrConflict answers action a decided on park pc, which the review
// item r no longer offers (resolved, or at another park).
func (l *Ledger) replayOrConflict(ctx context.Context, r *Review, a OperatorAction, pc int) (_ *Review, t *Task, _ bool, err error) {
	if r.Reason != ReviewPoisonMessage {
		if t, err = l.Get(ctx, r.TaskID); err != nil {
			return nil, nil, false, err
		}
	}
	if r.ParkCount == pc && r.Resolution == a.Resolution ||
		r.ParkCount > pc && a.Resolution == ResolutionRetry && t != nil && gGateOff.holds(t, nil) {
		return r, t, true, nil
	}
	if r.ParkCount != pc {
		return nil, nil, false, conflict(fmt.Sprintf("operator %s decided on park %d (the review item is at park %d, %s)", a.Resolution, pc, r.ParkCount, r.ReviewStatus), r.TaskID, t)
	}
	return nil, nil, false, conflict("operator "+a.Resolution+" (already resolved as "+r.Resolution+")", r.TaskID, t)
}

func (a OperatorAction) validate() error {
	switch {
	case a.Resolution != ResolutionRetry && a.Resolution != ResolutionCompleted && a.Resolution != ResolutionFailed:
		return fmt.Errorf("%w: resolution %q: want retry, completed or failed", ErrInvalidAction, a.Resolution)
	case strings.TrimSpace(a.By) == "":
		return fmt.Errorf("%w: the operator (by) is required for the audit trail", ErrInvalidAction)
	case a.Resolution != ResolutionRetry && strings.TrimSpace(a.Note) == "":
		return fmt.Errorf("%w: a note (evidence or reason) is required to resolve as %s", ErrInvalidAction, a.Resolution)
	case len(a.Note) > MaxNote:
		return fmt.Errorf("%w: note is %d bytes; at most %d", ErrInvalidAction, len(a.Note), MaxNote)
	}
	return nil
}
