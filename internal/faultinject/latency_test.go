package faultinject_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestParseLatency(t *testing.T) {
	t.Parallel()
	l, err := faultinject.ParseLatency("DynamoDB=5ms, SQS=10ms,S3=1.5ms")
	if err != nil {
		t.Fatal(err)
	}
	if l["DynamoDB"] != 5*time.Millisecond || l["SQS"] != 10*time.Millisecond || l["S3"] != 1500*time.Microsecond || len(l) != 3 {
		t.Fatalf("parsed %v", l)
	}
	for _, bad := range []string{"DynamoDB", "DynamoDB=fast", "=5ms", "SQS=-1ms"} {
		if _, err := faultinject.ParseLatency(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	d := faultinject.DefaultLatency()
	if d["DynamoDB"] != 5*time.Millisecond || d["SQS"] != 10*time.Millisecond || d["S3"] != 15*time.Millisecond {
		t.Errorf("default latency %v", d)
	}
}

// The delay is added after the server performed the call: a call whose
// context ends while it waits fails with the context's error, but its write
// is in the table (a lost reply); a call that waits it out takes at least
// the delay (a lower bound, not a speed target). Services not listed get
// no delay: an hour on SQS does not hold up a DynamoDB call.
func TestLatencyDelaysAfterTheServer(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		client := func(l faultinject.Latency) *dynamodb.Client {
			cfg := e.AWS.Copy()
			cfg.APIOptions = append(append([]func(*middleware.Stack) error{}, e.AWS.APIOptions...), l.Register)
			return awsclient.DynamoDB(cfg)
		}
		put := func(c *dynamodb.Client, ctx context.Context, id string) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.Names.TasksTable), Item: map[string]types.AttributeValue{
				"task_id": &types.AttributeValueMemberS{Value: id}, "state": &types.AttributeValueMemberS{Value: "queued"}}})
			return err
		}
		exists := func(id string) bool {
			out, err := e.DDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(e.Names.TasksTable), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: id}}})
			if err != nil {
				t.Fatal(err)
			}
			return len(out.Item) > 0
		}

		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := put(client(faultinject.Latency{"DynamoDB": time.Hour}), ctx, "t_lat_lost")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want the context's deadline while waiting, got %v", err)
		}
		if !exists("t_lat_lost") {
			t.Error("the delayed call's write is not in the table: the delay was added before the server")
		}

		const d = 40 * time.Millisecond
		start := time.Now()
		if err := put(client(faultinject.Latency{"DynamoDB": d, "SQS": time.Hour}), context.Background(), "t_lat_ok"); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < d {
			t.Errorf("call returned after %s, before its %s delay", el, d)
		}
		if !exists("t_lat_ok") {
			t.Error("the call's write is missing")
		}
	})
}
