package tasklist

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// batchGetter is the BatchGetItem of *dynamodb.Client. The ledger.DynamoDB
// interface does not name it, so a wrapper that embeds DynamoDB (fault
// injection in tests) hides it: the lists then read item by item.
type batchGetter interface {
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var errUnprocessed = errors.New("keys left unprocessed after repeats")

// maxBatchGet is BatchGetItem's limit of keys per call.
const maxBatchGet = 100

// unprocessedTries bounds the repeats of a BatchGetItem's UnprocessedKeys.
const unprocessedTries = 4

// getTasks reads the tasks ids name, eventually consistently (a list may
// lag a write by a moment; every decision on a task reads it again).
func (r *Reader) getTasks(ctx context.Context, ids []string) (map[string]*ledger.Task, error) {
	return ReadTasks(ctx, r.led, ids, false)
}

// ReadTasks reads the tasks ids name from l's tasks table, with
// BatchGetItem where l's client has it (else item by item), strongly
// consistent or not. A task that is not there is absent from the map.
func ReadTasks(ctx context.Context, l *ledger.Ledger, ids []string, consistent bool) (map[string]*ledger.Task, error) {
	db, table := l.DB(), l.Config().TasksTable
	out := make(map[string]*ledger.Task, len(ids))
	bg, ok := db.(batchGetter)
	if !ok {
		for _, id := range ids {
			g, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: taskKey(id), ConsistentRead: aws.Bool(consistent)})
			if err != nil {
				return nil, wrap("GetItem task", err)
			}
			if len(g.Item) > 0 {
				t, err := decodeTask(g.Item)
				if err != nil {
					return nil, err
				}
				out[t.TaskID] = t
			}
		}
		return out, nil
	}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), maxBatchGet)]
		ids = ids[len(chunk):]
		keys := make([]map[string]types.AttributeValue, 0, len(chunk))
		seen := map[string]bool{}
		for _, id := range chunk {
			if !seen[id] {
				seen[id] = true
				keys = append(keys, taskKey(id))
			}
		}
		req := map[string]types.KeysAndAttributes{table: {Keys: keys, ConsistentRead: aws.Bool(consistent)}}
		wait := 20 * time.Millisecond
		for try := 0; len(req) > 0; try++ {
			if try == unprocessedTries {
				return nil, &ledger.ThrottledError{Op: "BatchGetItem tasks", RetryAfter: time.Second, Err: errUnprocessed}
			}
			if try > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				wait *= 2
			}
			res, err := bg.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, wrap("BatchGetItem tasks", err)
			}
			for _, item := range res.Responses[table] {
				t, err := decodeTask(item)
				if err != nil {
					return nil, err
				}
				out[t.TaskID] = t
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}
