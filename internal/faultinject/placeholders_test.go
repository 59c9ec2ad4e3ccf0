package faultinject_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/faultinject"
)

func TestCheckNames(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		params any
		bad    string
	}{
		"distinct":           {&dynamodb.UpdateItemInput{ExpressionAttributeNames: map[string]string{"#a": "slots", "#b": "sealed"}}, ""},
		"prefix, same text":  {&dynamodb.UpdateItemInput{ExpressionAttributeNames: map[string]string{"#lease": "lease", "#lease_owner": "lease_owner"}}, ""},
		"prefix, other name": {&dynamodb.UpdateItemInput{ExpressionAttributeNames: map[string]string{"#s": "slots", "#sr": "sealed"}}, `"#s"`},
		"in a transaction": {&dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String("t")}},
			{Update: &types.Update{ExpressionAttributeNames: map[string]string{"#v": "version", "#vx": "x"}}},
		}}, `"#v"`},
		"in a query": {&dynamodb.QueryInput{ExpressionAttributeNames: map[string]string{"#st": "state", "#s": "scope"}}, `"#s"`},
		"no names":   {&dynamodb.GetItemInput{TableName: aws.String("t")}, ""},
	} {
		err := faultinject.CheckNames(c.params)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%s: %v, want no error", name, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("%s: %v, want an error naming %s", name, err, c.bad)
		}
	}
}
