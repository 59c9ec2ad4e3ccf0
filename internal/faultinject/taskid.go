package faultinject

import (
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// TaskIDOf returns the task a typed SDK input is about: the "task_id" key
// attribute of a DynamoDB item or key (the tasks and review tables are both
// keyed by it), or the task_id of an SQS task message body. It returns ""
// for inputs that name no single task.
func TaskIDOf(params any) string {
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		return keyOf(in.Item)
	case *dynamodb.GetItemInput:
		return keyOf(in.Key)
	case *dynamodb.UpdateItemInput:
		return keyOf(in.Key)
	case *dynamodb.DeleteItemInput:
		return keyOf(in.Key)
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			var id string
			switch {
			case it.Update != nil:
				id = keyOf(it.Update.Key)
			case it.Put != nil:
				id = keyOf(it.Put.Item)
			case it.ConditionCheck != nil:
				id = keyOf(it.ConditionCheck.Key)
			case it.Delete != nil:
				id = keyOf(it.Delete.Key)
			}
			if id != "" {
				return id
			}
		}
	case *sqs.SendMessageInput:
		if in.MessageBody != nil {
			return bodyTaskID(*in.MessageBody)
		}
	}
	return ""
}

func keyOf(item map[string]types.AttributeValue) string {
	if s, ok := item["task_id"].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func bodyTaskID(body string) string {
	var m struct {
		TaskID string `json:"task_id"`
	}
	if json.Unmarshal([]byte(body), &m) != nil {
		return ""
	}
	return m.TaskID
}
