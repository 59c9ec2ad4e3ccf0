package overview

import (
	"context"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// WatchFigures count the submitted tasks the reconciler has not checked
// yet (pkg/ledger/watch.go): their watch items past each shard's cursor.
// Such a task is queued or running (unless it ended meanwhile) and in no
// by_state count until the reconciler reads its watch item at its
// dispatch deadline and, finding it still live, adopts it; so the active
// count leaves out about the last dispatch timeout's submissions.
type WatchFigures struct {
	// Pending: submitted, not yet checked. It includes tasks that ended
	// before their check (their watch item is read all the same).
	Pending int `json:"pending"`
}

// WatchPending counts the watch items past each shard's cursor: one
// consistent Query of the cursors (pk "cursor"), then per shard a
// consistent Select COUNT Query of pk "w#NN" with sk after the shard's
// cursor (consistent: a cursor just moved, or an item just put, is seen).
// queries is the number of Query pages made, also on error. A ledger
// without a watch table has nothing pending (0, 0, nil).
func WatchPending(ctx context.Context, l *ledger.Ledger) (n, queries int, err error) {
	cfg := l.Config()
	if cfg.WatchTable == "" {
		return 0, 0, nil
	}
	str := func(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
	cursors := map[int]string{}
	p := dynamodb.NewQueryPaginator(l.DB(), &dynamodb.QueryInput{
		TableName:                 aws.String(cfg.WatchTable),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(ledger.CursorPK)},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		queries++
		if err != nil {
			return 0, queries, err
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
	for shard := range cfg.Shards {
		pk, _ := ledger.WatchKey(shard, 0, "")
		cond, vals := "pk = :pk", map[string]types.AttributeValue{":pk": str(pk)}
		if c := cursors[shard]; c != "" { // a key condition takes no empty string
			cond, vals[":lo"] = "pk = :pk AND sk > :lo", str(c)
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
				return 0, queries, err
			}
			n += int(page.Count)
		}
	}
	return n, queries, nil
}
