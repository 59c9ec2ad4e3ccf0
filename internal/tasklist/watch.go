package tasklist

import (
	"context"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// WatchCursors reads every shard's watch cursor (pkg/ledger/watch.go: the
// items of pk "cursor"; "" where none was written yet) with one consistent
// Query, and says how many Query pages it made, also on error.
func WatchCursors(ctx context.Context, l *ledger.Ledger) (cursors map[int]string, queries int, err error) {
	cursors = map[int]string{}
	p := dynamodb.NewQueryPaginator(l.DB(), &dynamodb.QueryInput{
		TableName:                 aws.String(l.Config().WatchTable),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(ledger.CursorPK)},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		queries++
		if err != nil {
			return nil, queries, wrap("Query watch cursors", err)
		}
		for _, it := range page.Items {
			sk, _ := it["sk"].(*types.AttributeValueMemberS)
			at, _ := it["at"].(*types.AttributeValueMemberS)
			if sk == nil || at == nil {
				continue
			}
			if shard, err := strconv.Atoi(sk.Value); err == nil {
				cursors[shard] = at.Value
			}
		}
	}
	return cursors, queries, nil
}

// WatchPending counts the watch items past each shard's cursor: the
// submitted tasks the reconciler has not checked yet, queued or running
// unless they ended meanwhile, and in no by_state count until it adopts
// them. Consistent reads (a cursor just moved, or an item just put, is
// seen): the cursors' Query, then per shard a Select COUNT Query of pk
// "w#NN" with sk after its cursor. queries is the number of Query pages
// made, also on error. A ledger without a watch table has nothing pending.
func WatchPending(ctx context.Context, l *ledger.Ledger) (n, queries int, err error) {
	cfg := l.Config()
	if cfg.WatchTable == "" {
		return 0, 0, nil
	}
	cursors, queries, err := WatchCursors(ctx, l)
	if err != nil {
		return 0, queries, err
	}
	for shard := range cfg.Shards {
		pk, _ := ledger.WatchKey(shard, 0, "")
		cond, vals := "pk = :pk", map[string]types.AttributeValue{":pk": s(pk)}
		if c := cursors[shard]; c != "" { // a key condition takes no empty string
			cond, vals[":lo"] = "pk = :pk AND sk > :lo", s(c)
		}
		p := dynamodb.NewQueryPaginator(l.DB(), &dynamodb.QueryInput{
			TableName:                 aws.String(cfg.WatchTable),
			KeyConditionExpression:    aws.String(cond),
			ExpressionAttributeValues: vals,
			Select:                    types.SelectCount,
			ConsistentRead:            aws.Bool(true),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			queries++
			if err != nil {
				return 0, queries, wrap("Query watch items", err)
			}
			n += int(page.Count)
		}
	}
	return n, queries, nil
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
