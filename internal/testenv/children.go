package testenv

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// Children returns the tasks of the Env's tasks table whose parent is id
// (a consistent, paged scan): the deliveries and notifications a task
// created.
func (e *Env) Children(t testing.TB, id string) []ledger.Task {
	t.Helper()
	p := dynamodb.NewScanPaginator(e.DDB, &dynamodb.ScanInput{
		TableName: aws.String(e.Names.TasksTable), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": "parent_task_id"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: id}},
	})
	var out []ledger.Task
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("scan the children of %s: %v", id, err)
		}
		var ts []ledger.Task
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &ts); err != nil {
			t.Fatal(err)
		}
		out = append(out, ts...)
	}
	return out
}
