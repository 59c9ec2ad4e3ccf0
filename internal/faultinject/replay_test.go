package faultinject_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A replayed conditional write is applied by its first send; the caller
// sees the second send's answer — its condition failing on the first's
// write — as after a lost reply retried by the SDK. Both sends pass the
// Injector registered after the Replayer.
func TestReplayedWriteFailsItsOwnCondition(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		target, other := ledger.TaskID("s", "replayed"), ledger.TaskID("s", "plain")
		var mu sync.Mutex
		var replays []error
		seen := map[string]int{}
		r := &faultinject.Replayer{
			Decide: func(c faultinject.Call, params any) bool {
				_, put := params.(*dynamodb.PutItemInput)
				return put && c.TaskID == target
			},
			OnReplay: func(c faultinject.Call, first, second error) {
				mu.Lock()
				replays = append(replays, second)
				mu.Unlock()
			},
		}
		inj := faultinject.New(nil)
		inj.OnResult = func(c faultinject.Call, _, _ any, _ error) {
			mu.Lock()
			seen[c.TaskID]++
			mu.Unlock()
		}
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(append([]func(*middleware.Stack) error{}, e.AWS.APIOptions...), r.Register, inj.Register)
		ddb := awsclient.DynamoDB(cfg)
		put := func(id string) error {
			_, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{
				TableName:                aws.String(e.Names.TasksTable),
				Item:                     map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: id}},
				ConditionExpression:      aws.String("attribute_not_exists(#id)"),
				ExpressionAttributeNames: map[string]string{"#id": "task_id"},
			})
			return err
		}

		err := put(target)
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t.Fatalf("replayed put: err = %v, want ConditionalCheckFailedException (its own first send wrote the item)", err)
		}
		got, gerr := e.DDB.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(e.Names.TasksTable), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: target}},
		})
		if gerr != nil || len(got.Item) == 0 {
			t.Fatalf("the first send's write is not in the table: %v", gerr)
		}
		if err := put(other); err != nil {
			t.Fatalf("a put the Replayer does not pick: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(replays) != 1 || !errors.As(replays[0], &ccf) {
			t.Errorf("OnReplay saw %v, want one replay failing its condition", replays)
		}
		if seen[target] != 2 || seen[other] != 1 {
			t.Errorf("the injector saw %d sends of the replayed put and %d of the other, want 2 and 1", seen[target], seen[other])
		}
	})
}
