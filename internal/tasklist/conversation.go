package tasklist

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// ByConversationIndex is the sparse GSI of template.yaml that lists a
// caller's tasks in one conversation: partition conv_key
// (ledger.ConversationKey), sort created_ms, KEYS_ONLY. Only tasks created
// with a conversation carry conv_key, and no write after Create changes
// either key attribute, so the index entry is written once, by the PutItem.
const ByConversationIndex = "by_conversation"

// MaxConversationPage is the most tasks one ConversationTasks page holds.
const MaxConversationPage = 50

// ConversationCursor is where a ConversationTasks page ends: the last
// task it read from the index (its creation and id).
type ConversationCursor struct {
	CreatedMs int64
	TaskID    string
}

// String encodes the cursor as "<created_ms base 36>.<task id>".
func (c ConversationCursor) String() string {
	return strconv.FormatInt(c.CreatedMs, 36) + "." + c.TaskID
}

// ParseConversationCursor reads what String wrote.
func ParseConversationCursor(s string) (ConversationCursor, error) {
	ms, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(ms, 36, 64)
	if !ok || err != nil || n < 0 || !ledger.ValidTaskID(id) {
		return ConversationCursor{}, errors.New("tasklist: malformed conversation cursor")
	}
	return ConversationCursor{CreatedMs: n, TaskID: id}, nil
}

// ConversationPage is one page of a conversation, oldest task first.
type ConversationPage struct {
	Tasks []*ledger.Task
	// Next is where the next page starts; nil on the last page.
	Next *ConversationCursor
}

// ConversationTasks returns up to limit (1..MaxConversationPage) of
// scope's tasks in conversation id, oldest first, after the cursor (nil:
// from the start): one Query of by_conversation (eventually consistent:
// a task created a moment ago may show on a later read) and one
// BatchGetItem of the page's tasks (eventually consistent too). Tasks past their retention
// (awaiting TTL deletion) are left out; a page may then hold fewer than
// limit tasks and still have a Next.
//
// Errors: *ledger.ThrottledError; others wrapped with the operation.
func (r *Reader) ConversationTasks(ctx context.Context, scope, id string, limit int, after *ConversationCursor) (*ConversationPage, error) {
	if !contract.ValidConversationID(id) || scope == "" {
		return &ConversationPage{}, nil
	}
	limit = min(max(limit, 1), MaxConversationPage)
	key := ledger.ConversationKey(scope, id)
	in := &dynamodb.QueryInput{
		TableName:                 &r.cfg.TasksTable,
		IndexName:                 aws.String(ByConversationIndex),
		KeyConditionExpression:    aws.String("#k = :k"),
		ExpressionAttributeNames:  map[string]string{"#k": "conv_key"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": str(key)},
		ScanIndexForward:          aws.Bool(true),
		Limit:                     aws.Int32(int32(limit)),
	}
	if after != nil {
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			"conv_key": str(key), "created_ms": num(after.CreatedMs), "task_id": str(after.TaskID),
		}
	}
	out, err := r.db.Query(ctx, in)
	if err != nil {
		return nil, wrap("Query by_conversation", err)
	}
	ids := make([]string, 0, len(out.Items))
	for _, it := range out.Items {
		if s, ok := it["task_id"].(*types.AttributeValueMemberS); ok {
			ids = append(ids, s.Value)
		}
	}
	page := &ConversationPage{}
	if lek := out.LastEvaluatedKey; len(lek) > 0 {
		c := ConversationCursor{}
		if s, ok := lek["task_id"].(*types.AttributeValueMemberS); ok {
			c.TaskID = s.Value
		}
		if n, ok := lek["created_ms"].(*types.AttributeValueMemberN); ok {
			c.CreatedMs, _ = strconv.ParseInt(n.Value, 10, 64)
		}
		page.Next = &c
	}
	byID, err := r.getTasks(ctx, ids)
	if err != nil {
		return nil, err
	}
	now := r.cfg.Now()
	for _, tid := range ids {
		t := byID[tid]
		// The key names the caller's conversation; the item is checked
		// too, so no index lag or reused id shows another's task.
		if t == nil || t.Scope != scope || t.ConversationID != id || t.PastRetention(now) {
			continue
		}
		page.Tasks = append(page.Tasks, t)
	}
	return page, nil
}
