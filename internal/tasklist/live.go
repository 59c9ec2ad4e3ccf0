package tasklist

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// LiveRef is a task as the by_state index projects it: its key, due_at
// and what no claim or renewal changes (so neither bills an index write).
// Its state is not there: read the task, or act on its Partition under a
// condition that holds the state, as ledger.ClaimDispatch does.
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

// Partition returns the entry's partition family (ledger.PartitionOf): the
// part of state_shard before its shard number.
func (r LiveRef) Partition() ledger.State {
	p, _, _ := strings.Cut(r.StateShard, "#")
	return ledger.State(p)
}

// dispatchFrom are the states the dispatch transition moves from, read
// once from the ledger's table, which stays their one source.
var dispatchFrom = func() []ledger.State {
	for _, tr := range ledger.Transitions() {
		if tr.Op == "dispatch" {
			return tr.From
		}
	}
	panic("tasklist: the ledger's table has no dispatch transition")
}()

// RelayTask returns the entry as the partial task the outbox relay needs
// (ledger.ClaimDispatch and the age-budget check), for an entry of a
// partition the relay moves from that carries its age deadline: queued
// for an active entry (a running task refuses the dispatch, and the
// refusal returns it), retry_wait for a retry_wait one; ok=false
// otherwise (read the task). ClaimDispatch's condition makes acting on a
// stale entry harmless.
func (r LiveRef) RelayTask() (*ledger.Task, bool) {
	st := r.Partition()
	if st == ledger.StateActive {
		st = ledger.StateQueued
	}
	if !slices.Contains(dispatchFrom, st) || r.DeadlineMs <= 0 {
		return nil, false
	}
	return &ledger.Task{
		TaskID: r.TaskID, State: st, DueAt: r.DueAt, Dispatches: r.Dispatches, MaxAttempts: r.MaxAttempts,
		DeadlineMs: r.DeadlineMs, BudgetStartMs: r.BudgetStartMs, Kind: r.Kind, CorrelationID: r.CorrelationID,
	}, true
}

// LiveQuery selects one shard of one by_state partition: State is a
// partition (ledger.Partitions) or a live state, which selects its
// partition (queued and running both select ledger.StateActive).
type LiveQuery struct {
	State ledger.State
	Shard int
	// DueBefore, when > 0, returns only tasks with due_at < DueBefore (ms).
	DueBefore int64
	Limit     int32
	Cursor    string
}

// QueryLive pages through one by_state shard of l's tasks table in due_at
// order. Terminal and parked tasks are never returned (they are not in the
// sparse index). Errors: ErrBadCursor, *ledger.ThrottledError.
func QueryLive(ctx context.Context, l *ledger.Ledger, q LiveQuery) (refs []LiveRef, next string, err error) {
	if !slices.Contains(ledger.Partitions, ledger.PartitionOf(q.State)) {
		return nil, "", fmt.Errorf("tasklist: QueryLive: %q is not a live state", q.State)
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	start, err := decodeKeyCursor(q.Cursor, map[string]string{"task_id": "S", "state_shard": "S:" + ledger.ShardKey(q.State, q.Shard), "due_at": "N"})
	if err != nil {
		return nil, "", err
	}
	out, err := queryByState(ctx, l, "Query by_state", q.State, q.Shard, func(in *dynamodb.QueryInput) {
		in.Limit, in.ExclusiveStartKey = aws.Int32(q.Limit), start
		if q.DueBefore > 0 {
			in.KeyConditionExpression = aws.String("#ss = :ss AND #due < :before")
			in.ExpressionAttributeNames["#due"] = "due_at"
			in.ExpressionAttributeValues[":before"] = num(q.DueBefore)
		}
	})
	if err != nil {
		return nil, "", badCursor(start, err)
	}
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &refs); err != nil {
		return nil, "", fmt.Errorf("tasklist: decode live refs: %w", err)
	}
	next, err = encodeKeyCursor(out.LastEvaluatedKey)
	return refs, next, err
}

// CountLive counts the tasks in one shard of s's by_state partition of l's
// tasks table (Select COUNT, paging): of queued and running together for
// either.
func CountLive(ctx context.Context, l *ledger.Ledger, s ledger.State, shard int) (int, error) {
	var start map[string]types.AttributeValue
	for n := 0; ; {
		out, err := queryByState(ctx, l, "Query by_state count", s, shard, func(in *dynamodb.QueryInput) {
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
func queryByState(ctx context.Context, l *ledger.Ledger, op string, s ledger.State, shard int, set func(*dynamodb.QueryInput)) (*dynamodb.QueryOutput, error) {
	cfg := l.Config()
	in := &dynamodb.QueryInput{
		TableName:                 &cfg.TasksTable,
		IndexName:                 aws.String(ledger.ByStateIndex),
		KeyConditionExpression:    aws.String("#ss = :ss"),
		ExpressionAttributeNames:  map[string]string{"#ss": "state_shard"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":ss": str(ledger.ShardKey(s, shard))},
	}
	set(in)
	out, err := l.DB().Query(ctx, in)
	if err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}
