package tasklist

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// ByOwnerIndex is the GSI of a caller's tasks, newest first (template.yaml):
// partition scope, sort created_ms, projecting kind. Every attribute it
// holds is written once, by the create's put, and never changed, so no
// later write of a task touches its entry: one index write unit per task,
// and nothing in the item of its own.
const ByOwnerIndex = "by_owner"

// List bounds: a page holds at most MaxListLimit tasks, and one call
// reads at most MaxListReads task items and evaluates at most
// MaxListScanned index entries (a filter that drops most of them ends the
// page early, with a cursor to continue).
const (
	MaxListLimit   = 100
	MaxListReads   = 100
	MaxListScanned = 500
)

// OwnerQuery selects a page of one caller's tasks, newest first.
type OwnerQuery struct {
	// Scope is the caller's: only its partition is read.
	Scope string
	// Kind, when set, keeps tasks of that kind (filtered in the index).
	Kind string
	// States, when set, keeps tasks in one of them (read from the items).
	States []ledger.State
	// Limit is the most tasks returned (1..MaxListLimit).
	Limit int
	// Cursor is the Next of the previous page ("" for the first).
	Cursor string
}

// Page is one page of a list: its tasks, and the cursor of the next page
// ("" when the list has no more). A page may hold fewer than its limit —
// even none — and still have a Next: its filter dropped what the call
// could read.
type Page struct {
	Tasks []*ledger.Task
	Next  string
}

// ownerPos is a by_owner cursor's position: the last index entry examined
// (its created_ms and task id; the next page continues after it).
type ownerPos struct {
	Ms int64  `json:"m,omitempty"`
	ID string `json:"a,omitempty"`
}

// ListByOwner returns a page of q.Scope's tasks, newest first, read from
// the by_owner index and then item by item (BatchGetItem, eventually
// consistent) for their current state. A task created before the index
// existed is not listed. Errors: ErrBadCursor (wrapped) for a cursor this
// list did not give this scope, *ledger.ThrottledError.
func (r *Reader) ListByOwner(ctx context.Context, q OwnerQuery) (Page, error) {
	if q.Scope == "" || q.Limit < 1 || q.Limit > MaxListLimit {
		return Page{}, fmt.Errorf("tasklist: ListByOwner needs a Scope and a Limit of 1..%d", MaxListLimit)
	}
	var pos ownerPos
	if err := r.openCursor("owner", q.Scope, q.Cursor, &pos); err != nil {
		return Page{}, err
	}
	var out []*ledger.Task
	reads, scanned := 0, 0
	next := func() (Page, error) {
		c, err := r.sealCursor("owner", q.Scope, pos)
		return Page{Tasks: out, Next: c}, err
	}
	for {
		in := &dynamodb.QueryInput{
			TableName:                &r.cfg.TasksTable,
			IndexName:                aws.String(ByOwnerIndex),
			KeyConditionExpression:   aws.String("#sc = :sc"),
			ExpressionAttributeNames: map[string]string{"#sc": "scope"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":sc": str(q.Scope),
			},
			ScanIndexForward: aws.Bool(false),
		}
		if pos.ID != "" {
			// Entries may share a created_ms: the start key (the index's
			// key and the table's) orders them by task id.
			in.ExclusiveStartKey = map[string]types.AttributeValue{
				"scope": str(q.Scope), "created_ms": num(pos.Ms), "task_id": str(pos.ID),
			}
		}
		// Without a filter a page needs exactly the tasks still missing;
		// with one, read ahead (the filter drops some).
		n := q.Limit - len(out)
		if q.Kind != "" || len(q.States) > 0 {
			n = MaxListLimit
		}
		n = min(n, MaxListScanned-scanned)
		in.Limit = aws.Int32(int32(n))
		// The kind is filtered here, not by a FilterExpression (which
		// bills the same): every entry evaluated comes back, so the
		// position is always the last entry (an emulator's
		// LastEvaluatedKey names only the table key).
		res, err := r.db.Query(ctx, in)
		if err != nil {
			return Page{}, wrap("Query by_owner", err)
		}
		scanned += n
		items := res.Items
		i := 0
		for i < len(items) && len(out) < q.Limit && reads < MaxListReads {
			want := min(q.Limit-len(out), MaxListReads-reads)
			j, ids := i, []string{}
			for ; j < len(items) && len(ids) < want; j++ {
				if q.Kind == "" || attrString(items[j], "kind") == q.Kind {
					ids = append(ids, attrString(items[j], "task_id"))
				}
			}
			tasks, err := r.getTasks(ctx, ids)
			if err != nil {
				return Page{}, err
			}
			reads += len(ids)
			for ; i < j; i++ {
				pos.ID, pos.Ms = attrString(items[i], "task_id"), attrInt(items[i], "created_ms")
				if q.Kind != "" && attrString(items[i], "kind") != q.Kind {
					continue
				}
				t := tasks[attrString(items[i], "task_id")]
				if t != nil && t.Scope == q.Scope && (len(q.States) == 0 || slices.Contains(q.States, t.State)) {
					out = append(out, t)
				}
			}
		}
		switch {
		case i < len(items):
			return next() // the page is full, or the reads are spent, inside this query's entries
		case len(res.LastEvaluatedKey) == 0:
			return Page{Tasks: out}, nil // the scope's partition is exhausted
		case len(out) == q.Limit || reads >= MaxListReads || scanned >= MaxListScanned:
			return next()
		}
	}
}
