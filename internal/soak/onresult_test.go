package soak

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/faultinject"
)

// TestOnResultCountsTransactionalSaves: a result saved inside a transaction
// (CompleteLapsed) is a result write like Complete's UpdateItem — seen at
// 10,000 tasks as "completed with 0 result writes" for stale workers whose
// lapsed result settled their park. A refused transaction counts as a
// fenced save; one that only touches the review does not count.
func TestOnResultCountsTransactionalSaves(t *testing.T) {
	s := &soak{saves: map[string]int{}, fencedSav: map[string]int{}, maybeSav: map[string]int{}}
	tx := func(expr string) *dynamodb.TransactWriteItemsInput {
		return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{
				Key:                      map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: "t_a"}},
				UpdateExpression:         aws.String(expr),
				ExpressionAttributeNames: map[string]string{"#r": "result", "#s": "state"},
			}},
		}}
	}
	call := faultinject.Call{Service: "DynamoDB", Operation: "TransactWriteItems"}
	s.onResult(call, tx("SET #s = :s, #r = :r"), nil, nil)
	s.onResult(call, tx("SET #s = :s, #r = :r"), nil, &types.TransactionCanceledException{})
	s.onResult(call, tx("SET #s = :s"), nil, nil)
	s.onResult(call, tx("SET #s = :s, #r = :r"), nil, errors.New("timeout"))
	if s.saves["t_a"] != 1 || s.fencedSav["t_a"] != 1 || s.maybeSav["t_a"] != 1 {
		t.Fatalf("saves %d, fenced %d, maybe %d; want 1, 1, 1", s.saves["t_a"], s.fencedSav["t_a"], s.maybeSav["t_a"])
	}
}
