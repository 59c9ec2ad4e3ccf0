package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// MaxFollowUps caps the follow-up tasks one write creates (WithFollowUps,
// ParkOptions.FollowUps): a plan's deliveries and a few notifications, well
// inside TransactWriteItems' 100 items.
const MaxFollowUps = MaxDeliveries + 5

// followUpTwin is the row a write with follow-ups is sent as: its
// "_follow_ups" twin (the same guards) where the table has one, else tr.
func followUpTwin(tr *Transition) *Transition {
	if tw, ok := byOp[tr.Op+"_follow_ups"]; ok {
		return tw
	}
	return tr
}

// followUpItems are the conditional puts (row follow_up) of taskID's
// follow-up tasks fs, created at now; the ids of a plan's deliveries among
// them become u's delivery_ids (listed as an approval's are) unless u is nil.
func (l *Ledger) followUpItems(op, taskID string, fs []NewTask, now time.Time, u *update) ([]types.TransactWriteItem, error) {
	if len(fs) > MaxFollowUps {
		return nil, fmt.Errorf("ledger: %s %s: %d follow-up tasks, at most %d", op, taskID, len(fs), MaxFollowUps)
	}
	items := make([]types.TransactWriteItem, 0, len(fs))
	var planned []string
	for _, n := range fs {
		if n.ParentTaskID != taskID {
			return nil, fmt.Errorf("ledger: %s %s: a follow-up task must name it as its parent (it names %q)", op, taskID, n.ParentTaskID)
		}
		d, put, err := l.newTaskPut(op+" follow-up", n, now)
		if err != nil {
			return nil, err
		}
		if n.Provenance != nil && n.Provenance.Type == ProvenancePlan {
			planned = append(planned, d.TaskID)
		}
		items = append(items, put)
	}
	if len(planned) > 0 && u != nil {
		u.set("delivery_ids", strList(planned))
	}
	return items, nil
}

// newTaskPut is the conditional put (attribute_not_exists: rows follow_up
// and approve_delivery) of the new task n, created at now; op names the
// write in an *ItemTooLargeError.
func (l *Ledger) newTaskPut(op string, n NewTask, now time.Time) (*Task, types.TransactWriteItem, error) {
	d, item, err := l.newTaskItem(n, now)
	if err != nil {
		return nil, types.TransactWriteItem{}, err
	}
	if sz := itemsize.Item(item); sz > itemsize.MaxItemBytes {
		return nil, types.TransactWriteItem{}, &ItemTooLargeError{TaskID: d.TaskID, Op: op, Bytes: sz, ResultBytes: len(d.Input), Limit: itemsize.MaxItemBytes}
	}
	return d, types.TransactWriteItem{Put: &types.Put{TableName: &l.cfg.TasksTable, Item: item,
		ConditionExpression: aws.String("attribute_not_exists(#id)"), ExpressionAttributeNames: map[string]string{"#id": "task_id"}}}, nil
}

// writeTx sends u as tr for c in one TransactWriteItems with u.tx (a lapsed
// settlement's review item) and the puts of the follow-up tasks fs. A
// refusal is a *FencedError as write returns it, or a *ConflictError when
// the task would have taken the write (so a follow-up's id was taken).
func (l *Ledger) writeTx(ctx context.Context, label string, tr *Transition, taskID string, c *Call, u *update, fs []NewTask) (*Task, error) {
	op := label + pick(len(fs) > 0, " with follow-ups", "")
	items, err := l.followUpItems(op, taskID, fs, c.Now, u)
	if err != nil {
		return nil, err
	}
	items = append(u.tx, items...)
	if err := tr.condition(u, c).fits(l.cfg.TasksTable, taskID, op); err != nil {
		return nil, err
	}
	cur, refused, err := l.txWrite(ctx, label, taskID, u, items)
	switch {
	case err != nil:
		return nil, err
	case refused && cur != nil && u.tx == nil && tr.Allows(cur, *c):
		return nil, conflict(op+": a follow-up task's id is taken", taskID, cur)
	case refused:
		return nil, fencedBy(taskID, c.Version, cur)
	}
	if tr.To == StateQueued {
		return l.clampDue(ctx, cur)
	}
	return cur, nil
}
