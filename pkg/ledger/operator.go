package ledger

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// OperatorAction is an operator's decision on an open review item.
type OperatorAction struct {
	// Resolution is ResolutionRetry, ResolutionCompleted or ResolutionFailed.
	Resolution string
	// Note is the evidence or explanation (required for completed/failed).
	Note string
	// By names the operator (IAM user, email); required.
	By string
	// ParkCount is the park the action was decided on (the park_count of
	// the review item and the task); 0: the review open now.
	ParkCount int
}

// ErrInvalidAction is returned (wrapped) for an operator action that is
// malformed: unknown resolution, missing operator or note.
var ErrInvalidAction = errors.New("ledger: invalid operator action")

// MaxNote caps operator notes (bytes).
const MaxNote = 2000

// Act applies an operator action to the review item of taskID and its
// task in one transaction, conditioned on the item being open and the task
// parked at the version read (rows operator_*): retry queues the task
// again with a fresh budget (the caller then sends its SQS message);
// completed completes it with the note as evidence; failed fails it with
// the note as its error. Repeating an applied action is a no-op
// (replayed=true); another action on a resolved item is a *ConflictError.
// An action given its park (a.ParkCount) decides that park alone: after
// the task was parked again it is a *ConflictError, nothing changed — a
// replay only for a retry of a task with no approval gate, which leaves a
// park for a later one only through a retry (an operator's, RetryLapsed,
// ReleaseLapsed). A poison-message item has no task: completed or failed
// just close it.
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
			// The previous error stays on the (resolved) review item; the
			// task starts clean so its view does not show a stale error.
			tu.remove("review_reason", "review_summary", "result", "result_ref", "lease_owner", "lease_until", "not_before", "error_class", "error_message")
			// A gated task starts its approval over: the new generation is
			// the artifact (and, if edited, the generated one) — nothing of
			// the last decision stays. The round and the withdrawn
			// deliveries stay, so new deliveries get new keys.
			tu.remove("result_sha256", "generated_result", "generated_sha256", "generated_result_ref", "approval_state",
				"approval_deadline_ms", "approval_sha256", "approval_basis_sha256", "decided_by", "decided_at", "approval_note",
				"approval_policy", "delivery_ids")
		case ResolutionCompleted:
			l.off(tu, StateCompleted, now)
			ev, _ := json.Marshal(map[string]any{"operator_resolution": map[string]string{
				"resolved_by": a.By, "evidence": a.Note, "resolved_at": rfc3339(now)}})
			tu.set("result", str(string(ev)))
			tu.set("result_sha256", str(SHA256Hex(string(ev))))
			tu.remove("result_ref")
			tu.set("completed_ms", num(now.UnixMilli()))
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
		if r, err = l.GetReview(ctx, taskID); err != nil || r.ReviewStatus == ReviewResolved || r.ParkCount != pc {
			if err != nil {
				return nil, nil, false, err
			}
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
func (l *Ledger) replayOrConflict(ctx context.Context, r *Review, a OperatorAction, pc int) (*Review, *Task, bool, error) {
	var t *Task
	if r.Reason != ReviewPoisonMessage {
		var err error
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
	switch a.Resolution {
	case ResolutionRetry, ResolutionCompleted, ResolutionFailed:
	default:
		return fmt.Errorf("%w: resolution %q: want retry, completed or failed", ErrInvalidAction, a.Resolution)
	}
	if strings.TrimSpace(a.By) == "" {
		return fmt.Errorf("%w: the operator (by) is required for the audit trail", ErrInvalidAction)
	}
	if a.Resolution != ResolutionRetry && strings.TrimSpace(a.Note) == "" {
		return fmt.Errorf("%w: a note (evidence or reason) is required to resolve as %s", ErrInvalidAction, a.Resolution)
	}
	if len(a.Note) > MaxNote {
		return fmt.Errorf("%w: note is %d bytes; at most %d", ErrInvalidAction, len(a.Note), MaxNote)
	}
	return nil
}

// LiveRef is a task as the by_state index projects it: its key, due_at
// and what no claim or renewal changes (so neither bills an index write).
// Its state is not there: read the task, or act on its Partition under a
// condition that holds the state, as ClaimDispatch does.
type LiveRef struct {
	TaskID        string `dynamodbav:"task_id"`
	StateShard    string `dynamodbav:"state_shard"`
	DueAt         int64  `dynamodbav:"due_at"`
	MaxAttempts   int    `dynamodbav:"max_attempts"`
	BudgetStartMs int64  `dynamodbav:"budget_start_ms"`
	// DeadlineMs is the age deadline; 0 where the index does not project it.
	DeadlineMs    int64  `dynamodbav:"deadline_ms"`
	Kind          string `dynamodbav:"kind"`
	CorrelationID string `dynamodbav:"correlation_id"`
	// Dispatches is the outbox re-send count (absent: 0).
	Dispatches int `dynamodbav:"dispatches"`
}

// Partition returns the entry's partition family (PartitionOf): the part of
// state_shard before its shard number.
func (r LiveRef) Partition() State {
	p, _, _ := strings.Cut(r.StateShard, "#")
	return State(p)
}

// RelayTask returns the entry as the partial task the outbox relay needs
// (ClaimDispatch and the age-budget check), for an entry of a partition
// the relay moves from that carries its age deadline: queued for an active
// entry (a running task refuses the dispatch, and the refusal returns it),
// retry_wait for a retry_wait one; ok=false otherwise (read the task).
// ClaimDispatch's condition makes acting on a stale entry harmless.
func (r LiveRef) RelayTask() (*Task, bool) {
	st := r.Partition()
	if st == StateActive {
		st = StateQueued
	}
	if !slices.Contains(row("dispatch").From, st) || r.DeadlineMs <= 0 {
		return nil, false
	}
	return &Task{
		TaskID: r.TaskID, State: st, DueAt: r.DueAt, Dispatches: r.Dispatches, MaxAttempts: r.MaxAttempts,
		DeadlineMs: r.DeadlineMs, BudgetStartMs: r.BudgetStartMs, Kind: r.Kind, CorrelationID: r.CorrelationID,
	}, true
}

// LiveQuery selects one shard of one by_state partition: State is a
// partition (Partitions) or a live state, which selects its partition
// (queued and running both select StateActive).
type LiveQuery struct {
	State State
	Shard int
	// DueBefore, when > 0, returns only tasks with due_at < DueBefore (ms).
	DueBefore int64
	Limit     int32
	Cursor    string
}

// QueryLive pages through one by_state shard in due_at order. Terminal and
// parked tasks are never returned (they are not in the sparse index).
func (l *Ledger) QueryLive(ctx context.Context, q LiveQuery) (refs []LiveRef, next string, err error) {
	if !slices.Contains(Partitions, PartitionOf(q.State)) {
		return nil, "", fmt.Errorf("ledger: QueryLive: %q is not a live state", q.State)
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	start, err := decodeCursor(q.Cursor)
	if err != nil {
		return nil, "", err
	}
	out, err := l.queryByState(ctx, "Query by_state", q.State, q.Shard, func(in *dynamodb.QueryInput) {
		in.Limit, in.ExclusiveStartKey = aws.Int32(q.Limit), start
		if q.DueBefore > 0 {
			in.KeyConditionExpression = aws.String("#ss = :ss AND #due < :before")
			in.ExpressionAttributeNames["#due"] = "due_at"
			in.ExpressionAttributeValues[":before"] = num(q.DueBefore)
		}
	})
	if err != nil {
		return nil, "", err
	}
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &refs); err != nil {
		return nil, "", fmt.Errorf("ledger: decode live refs: %w", err)
	}
	next, err = encodeCursor(out.LastEvaluatedKey)
	return refs, next, err
}

// CountLive counts the tasks in one shard of s's by_state partition (Select
// COUNT, paging): of queued and running together for either.
func (l *Ledger) CountLive(ctx context.Context, s State, shard int) (int, error) {
	var start map[string]types.AttributeValue
	for n := 0; ; {
		out, err := l.queryByState(ctx, "Query by_state count", s, shard, func(in *dynamodb.QueryInput) {
			in.Select, in.ExclusiveStartKey = types.SelectCount, start
		})
		if err != nil {
			return n, err
		}
		n += int(out.Count)
		if start = out.LastEvaluatedKey; len(start) == 0 {
			return n, nil
		}
	}
}

// queryByState sends one Query (label: op in errors) of one shard of s's
// by_state partition, as set adjusts it. The input is a literal here, so
// internal/templatetest sees which table and index the Query reads.
func (l *Ledger) queryByState(ctx context.Context, op string, s State, shard int, set func(*dynamodb.QueryInput)) (*dynamodb.QueryOutput, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &l.cfg.TasksTable,
		IndexName:                 aws.String(ByStateIndex),
		KeyConditionExpression:    aws.String("#ss = :ss"),
		ExpressionAttributeNames:  map[string]string{"#ss": "state_shard"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":ss": str(ShardKey(s, shard))},
	}
	set(in)
	out, err := l.db.Query(ctx, in)
	return out, wrapErr(op, err)
}
