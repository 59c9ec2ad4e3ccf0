package awsclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/awsclient"
)

// A server that always throttles shows the SDK's retries are bounded and
// that the counter sees one call but every attempt.
func TestRetriesBoundedAndCounted(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow down"}`))
	}))
	defer srv.Close()
	c := awsclient.NewCounter()
	cfg, err := awsclient.Load(context.Background(), awsclient.Options{
		Endpoint: srv.URL, StaticCredentials: true, MaxAttempts: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.APIOptions = append(cfg.APIOptions, c.Register)
	// No real backoff waits in the test: the retryer's delays are tiny for
	// attempt 1, and MaxAttempts=2 bounds them.
	_, err = awsclient.DynamoDB(cfg).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("x"), Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: "t"}}})
	if err == nil {
		t.Fatal("want a throttling error")
	}
	if got := hits.Load(); got != 2 {
		t.Fatalf("server saw %d attempts, want exactly MaxAttempts=2", got)
	}
	if c.Calls()["DynamoDB.GetItem"] != 1 || c.Attempts()["DynamoDB.GetItem"] != 2 {
		t.Fatalf("calls %v attempts %v", c.Calls(), c.Attempts())
	}
	if ks := c.Keys(); len(ks) != 1 || ks[0] != "DynamoDB.GetItem" {
		t.Fatalf("keys %v", ks)
	}
}

func TestBadMaxAttemptsEnv(t *testing.T) {
	t.Setenv("TASKLEDGER_SDK_MAX_ATTEMPTS", "zero")
	if _, err := awsclient.Load(context.Background(), awsclient.Options{}); err == nil {
		t.Fatal("want an error for a malformed TASKLEDGER_SDK_MAX_ATTEMPTS")
	}
}
