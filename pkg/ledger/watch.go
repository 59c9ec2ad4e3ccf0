package ledger

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The watch table (Config.WatchTable) lets the reconciler find a submitted
// task whose SQS message was lost without the task paying for a by_state
// entry (docs/protocol.md, "How a submitted task is found"). Create puts
// one write-once watch item per task, then the task without state_shard:
//
//	pk "w#<nn>" (the task's shard), sk "<due_at, 13 digits>#<task id>#<the
//	call's CreateNonce>", task_id, expires_at (TTL: WatchRetention past due_at)
//
// The reconciler reads each once it is due, in sk order behind a cursor per
// shard (item pk "cursor", sk "<nn>", "at" the last sk handled), and adopts
// a task still queued or running (row adopt); one that ends first is never
// indexed.
const (
	WatchPrefix = "w#"
	CursorPK    = "cursor"
)

// WatchRetention is how long a watch item outlives its due time: a
// reconciler stopped for longer than this would never see the tasks
// submitted before it stopped whose messages were lost.
const WatchRetention = 14 * 24 * time.Hour

// Shard returns the task's shard (FNV-1a of its id), of by_state and of
// the watch table.
func (l *Ledger) Shard(taskID string) int {
	h := fnv.New32a()
	h.Write([]byte(taskID))
	return int(h.Sum32() % uint32(l.cfg.Shards))
}

// WatchKey returns the watch table's partition (pk) of shard, and the sort
// key (sk) of a task due at dueMs.
func WatchKey(shard int, dueMs int64, taskID string) (pk, sk string) {
	return fmt.Sprintf("%s%02d", WatchPrefix, shard), fmt.Sprintf("%013d#%s", dueMs, taskID)
}

// watched reports whether submissions go through the watch table.
func (l *Ledger) watched() bool { return l.cfg.WatchTable != "" }

// watchItemKey is the key of the watch item of t's Create call: WatchKey
// and the call's CreateNonce, so no two calls share an item.
func (l *Ledger) watchItemKey(t *Task) map[string]types.AttributeValue {
	pk, sk := WatchKey(l.Shard(t.TaskID), t.DueAt, t.TaskID)
	return map[string]types.AttributeValue{"pk": str(pk), "sk": str(sk + "#" + t.CreateNonce)}
}

// putWatch puts the watch item of t's Create call. Unconditional: a
// repeat (a lost reply) writes the same item.
func (l *Ledger) putWatch(ctx context.Context, t *Task) error {
	item := l.watchItemKey(t)
	item["task_id"], item["expires_at"] = str(t.TaskID), num(time.UnixMilli(t.DueAt).Add(WatchRetention).Unix())
	_, err := l.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &l.cfg.WatchTable, Item: item})
	return wrapErr("PutItem watch", err)
}

// dropWatch deletes the watch item of a Create call that put no task (a
// replay, a key reused with another payload; Create says when a replay
// keeps it), so a refused submit leaves nothing behind. Best effort: an
// item a failed delete leaves costs the reconciler one needless read.
func (l *Ledger) dropWatch(ctx context.Context, t *Task) {
	if l.watched() {
		_, _ = l.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &l.cfg.WatchTable, Key: l.watchItemKey(t)})
	}
}

// Adopt puts t, a task the watch found queued or running and not in
// by_state, into by_state at its due_at (row adopt) and returns it as
// written. ok=false: it was no longer unindexed in either state, so nothing
// is left to do (also the answer to a repeat whose first try applied). It
// leaves write_nonce alone: a worker whose claim's reply was lost must
// still find its own nonce on the task it claimed.
func (l *Ledger) Adopt(ctx context.Context, t *Task) (*Task, bool, error) {
	u := newUpdate()
	u.set("state_shard", str(l.StateShard(t.State, t.TaskID)))
	out, err := l.db.UpdateItem(ctx, row("adopt").condition(u, &Call{}).input(l.cfg.TasksTable, t.TaskID))
	switch {
	case err == nil:
		nt, err := decodeTask(out.Attributes)
		return nt, err == nil, err
	case isConditionFailed(err):
		return nil, false, nil
	}
	return nil, false, wrapErr("UpdateItem adopt", err)
}
