package faultinject_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// TestItemSizeLimitRefusesWithoutApplying: over-limit writes fail with
// DynamoDB's ValidationException and leave the table as it was.
func TestItemSizeLimitRefusesWithoutApplying(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, faultinject.EnforceItemSize)
		db := awsclient.DynamoDB(cfg)
		table := aws.String(e.Names.TasksTable)
		key := func(id string) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: id}}
		}
		s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
		big := strings.Repeat("x", itemsize.MaxItemBytes)
		wantValidation := func(what string, err error) {
			t.Helper()
			var ae smithy.APIError
			if err == nil || !strings.Contains(err.Error(), "ValidationException") || !errors.As(err, &ae) || !strings.Contains(ae.ErrorMessage(), "Item size") {
				t.Fatalf("%s = %v; want ValidationException about the item size", what, err)
			}
		}
		absent := func(id string) {
			t.Helper()
			out, err := e.DDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key(id), ConsistentRead: aws.Bool(true)})
			if err != nil || len(out.Item) != 0 {
				t.Fatalf("%s after a refused write: %v, %v; want absent", id, out, err)
			}
		}

		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: map[string]types.AttributeValue{"task_id": s("p1"), "result": s(big)}})
		wantValidation("PutItem", err)
		absent("p1")

		_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: key("u1"),
			UpdateExpression: aws.String("SET #r = :r"), ExpressionAttributeNames: map[string]string{"#r": "result"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":r": s(big)}})
		wantValidation("UpdateItem", err)
		absent("u1")

		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: table, Item: map[string]types.AttributeValue{"task_id": s("x1"), "state": s("queued")}}},
			{Put: &types.Put{TableName: table, Item: map[string]types.AttributeValue{"task_id": s("x2"), "result": s(big)}}},
		}})
		wantValidation("TransactWriteItems", err)
		absent("x1")
		absent("x2")

		// Within the limit, writes go through.
		fits := strings.Repeat("y", 1000)
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: map[string]types.AttributeValue{"task_id": s("ok"), "result": s(fits)}}); err != nil {
			t.Fatalf("PutItem within the limit: %v", err)
		}
	})
}
