package ledger_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestTaskItemDecodesItsTimestampsFromEpochMs(t *testing.T) {
	t.Parallel()
	item, err := attributevalue.MarshalMap(&ledger.Task{TaskID: "t", CreatedMs: 1000, UpdatedMs: 2500, CompletedMs: 2500, CreatedAt: "ignored"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := item["created_at"]; ok {
		t.Fatalf("the item keeps created_at: %v", item)
	}
	var got ledger.Task
	if err := attributevalue.UnmarshalMap(item, &got); err != nil {
		t.Fatal(err)
	}
	if got.TaskID != "t" || got.CreatedAt != "1970-01-01T00:00:01Z" || got.UpdatedAt != "1970-01-01T00:00:02.5Z" || got.CompletedAt != got.UpdatedAt {
		t.Fatalf("decoded %q %q %q %q", got.TaskID, got.CreatedAt, got.UpdatedAt, got.CompletedAt)
	}
}
