package emulator

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/taskledger/taskledger/internal/awsclient"
)

// TestMotoServesDynamoDBAndSQSOnOneConnection: the launcher answers
// DynamoDB and SQS calls on a kept connection (one dial for many calls)
// with moto's own answers, a refused condition included.
func TestMotoServesDynamoDBAndSQSOnOneConnection(t *testing.T) {
	m, err := StartMoto(context.Background(), "")
	if err != nil {
		needMoto(t, err)
	}
	defer m.Stop()
	var dials atomic.Int32
	d := &net.Dialer{}
	client := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		// One connection at most: a request sent before the transport has
		// put the previous response's connection back in its pool would
		// otherwise race a new dial against it (a second dial under load,
		// with the server keeping the first open). A server that closes
		// the connection still costs a dial per request.
		tr.MaxConnsPerHost = 1
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		}
	})
	ctx := context.Background()
	cfg, err := awsclient.Load(ctx, awsclient.Options{Endpoint: m.URL, StaticCredentials: true, Region: "us-east-1", HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	db, q := awsclient.DynamoDB(cfg), sqs.NewFromConfig(cfg)
	createTable(t, db, "t", false)
	put := func() error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"),
			Item:                map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "a"}},
			ConditionExpression: aws.String("attribute_not_exists(k)")})
		return err
	}
	if err := put(); err != nil {
		t.Fatal(err)
	}
	var refused *types.ConditionalCheckFailedException
	if err := put(); !errors.As(err, &refused) {
		t.Fatalf("second conditional put: %v, want ConditionalCheckFailedException", err)
	}
	qu, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: qu.QueueUrl, MessageBody: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	got, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: qu.QueueUrl, WaitTimeSeconds: 1})
	if err != nil || len(got.Messages) != 1 || aws.ToString(got.Messages[0].Body) != "m" {
		t.Fatalf("receive: %v, %+v", err, got)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections for 6 calls, want 1 kept open", n)
	}
}

// needMoto ends a test that could not start moto: a skip that says why
// when moto is not installed, unless TASKLEDGER_REQUIRE_MOTO=1 (CI), and
// a failure for any other error.
func needMoto(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrMotoUnavailable) && os.Getenv("TASKLEDGER_REQUIRE_MOTO") != "1" {
		t.Skipf("%v (set TASKLEDGER_REQUIRE_MOTO=1 to fail instead)", err)
	}
	t.Fatal(err)
}
