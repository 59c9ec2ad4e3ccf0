package tasklist

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// Reader reads the lists of one ledger's tasks table. It is safe for
// concurrent use.
type Reader struct {
	led *ledger.Ledger
	db  ledger.DynamoDB
	cfg ledger.Config
}

// New returns the Reader of l's tasks table, through l's client.
func New(l *ledger.Ledger) *Reader { return &Reader{led: l, db: l.DB(), cfg: l.Config()} }

// wrap labels an AWS error with the operation that got it; a throttle is
// a *ledger.ThrottledError, as the ledger's own reads return it.
func wrap(op string, err error) error {
	if ledger.IsThrottle(err) {
		return &ledger.ThrottledError{Op: op, RetryAfter: time.Second, Err: err}
	}
	return fmt.Errorf("tasklist: %s: %w", op, err)
}

func decodeTask(item map[string]types.AttributeValue) (*ledger.Task, error) {
	var t ledger.Task
	if err := attributevalue.UnmarshalMap(item, &t); err != nil {
		return nil, fmt.Errorf("tasklist: decode task: %w", err)
	}
	return &t, nil
}

func taskKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"task_id": str(id)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue  { return &types.AttributeValueMemberN{Value: fmt.Sprint(n)} }

// attrInt returns item's number attribute name (0 when absent).
func attrInt(item map[string]types.AttributeValue, name string) int64 {
	if n, ok := item[name].(*types.AttributeValueMemberN); ok {
		v, _ := strconv.ParseInt(n.Value, 10, 64)
		return v
	}
	return 0
}

// attrString returns item's string attribute name ("" when absent).
func attrString(item map[string]types.AttributeValue, name string) string {
	if s, ok := item[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}
