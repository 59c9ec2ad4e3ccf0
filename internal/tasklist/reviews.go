package tasklist

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// ListOpenReviews pages through the open items of l's review table, oldest
// first, through the open_reviews index. cursor is "" for the first page;
// next is "" after the last. Errors: ErrBadCursor, *ledger.ThrottledError.
func ListOpenReviews(ctx context.Context, l *ledger.Ledger, limit int32, cursor string) (items []ledger.Review, next string, err error) {
	if limit <= 0 {
		limit = 50
	}
	cfg := l.Config()
	in := &dynamodb.QueryInput{
		TableName:                 &cfg.ReviewTable,
		IndexName:                 aws.String(ledger.OpenReviewsIndex),
		KeyConditionExpression:    aws.String("#rs = :open"),
		ExpressionAttributeNames:  map[string]string{"#rs": "review_status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":open": str(ledger.ReviewOpen)},
		Limit:                     aws.Int32(limit),
	}
	if in.ExclusiveStartKey, err = decodeKeyCursor(cursor, map[string]string{"task_id": "S", "review_status": "S:" + ledger.ReviewOpen, "dead_lettered_at": "S"}); err != nil {
		return nil, "", err
	}
	out, err := l.DB().Query(ctx, in)
	if err != nil {
		return nil, "", badCursor(in.ExclusiveStartKey, wrap("Query open_reviews", err))
	}
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &items); err != nil {
		return nil, "", fmt.Errorf("tasklist: decode reviews: %w", err)
	}
	next, err = encodeKeyCursor(out.LastEvaluatedKey)
	return items, next, err
}
