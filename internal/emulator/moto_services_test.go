package emulator

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/taskledger/taskledger/internal/awsclient"
)

// motoConfig starts the launcher and returns an SDK configuration for it
// (the SDK's own retries bounded, so a failing call fails fast).
func motoConfig(t *testing.T) aws.Config {
	t.Helper()
	m, err := StartMoto(context.Background(), "")
	if err != nil {
		needMoto(t, err)
	}
	t.Cleanup(m.Stop)
	return sdkConfig(t, m.URL, "us-east-1")
}

// sdkConfig is an SDK configuration for the server at url in region (the
// SDK's own retries bounded, so a failing call fails fast).
func sdkConfig(t *testing.T, url, region string) aws.Config {
	t.Helper()
	cfg, err := awsclient.Load(context.Background(), awsclient.Options{Endpoint: url, StaticCredentials: true,
		Region: region, MaxAttempts: 1, HTTPClient: awsclient.DefaultHTTPClient()})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// createTable creates a table keyed by the string "k" (with a stream when
// asked) and returns its description.
func createTable(t testing.TB, db *dynamodb.Client, name string, stream bool) *types.TableDescription {
	t.Helper()
	in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: types.KeyTypeHash}}}
	if stream {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	}
	out, err := db.CreateTable(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out.TableDescription
}

// TestMotoServesDynamoDBStreams: the DynamoDB Streams API (its
// X-Amz-Target begins "DynamoDBStreams_") is a service of its own, which
// moto_server answers; a table created with a StreamSpecification (the
// stack creates them) has its writes readable there.
func TestMotoServesDynamoDBStreams(t *testing.T) {
	cfg := motoConfig(t)
	ctx := context.Background()
	db, st := awsclient.DynamoDB(cfg), dynamodbstreams.NewFromConfig(cfg)
	desc := createTable(t, db, "streamed", true)
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("streamed"),
		Item: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "a"}}}); err != nil {
		t.Fatal(err)
	}
	streams, err := st.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String("streamed")})
	if err != nil {
		t.Fatalf("ListStreams: %v", err)
	}
	if len(streams.Streams) != 1 || aws.ToString(streams.Streams[0].StreamArn) != aws.ToString(desc.LatestStreamArn) {
		t.Fatalf("ListStreams: %+v, want the table's stream %s", streams.Streams, aws.ToString(desc.LatestStreamArn))
	}
	d, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: desc.LatestStreamArn})
	if err != nil || len(d.StreamDescription.Shards) == 0 {
		t.Fatalf("DescribeStream: %v, %+v", err, d)
	}
	it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: desc.LatestStreamArn,
		ShardId: d.StreamDescription.Shards[0].ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatalf("GetShardIterator: %v", err)
	}
	recs, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatalf("GetRecords: %v", err)
	}
	if len(recs.Records) != 1 || recs.Records[0].EventName != streamtypes.OperationTypeInsert {
		t.Fatalf("GetRecords: %+v, want the one INSERT", recs.Records)
	}
}

// TestMotoKeepsAccountsApart: moto_server serves the account a request
// names in its x-moto-account-id header (moto's way to test several
// accounts against one server); a table created in one account is not
// listed in another.
func TestMotoKeepsAccountsApart(t *testing.T) {
	cfg := motoConfig(t)
	ctx := context.Background()
	other := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue("x-moto-account-id", "111122223333"))
	})
	mine := awsclient.DynamoDB(cfg)
	createTable(t, other, "elsewhere", false)
	got, err := mine.ListTables(ctx, &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.TableNames) != 0 {
		t.Errorf("default account lists %v, a table created in account 111122223333", got.TableNames)
	}
	got, err = other.ListTables(ctx, &dynamodb.ListTablesInput{})
	if err != nil || len(got.TableNames) != 1 {
		t.Errorf("account 111122223333 lists %v (%v), want its one table", got, err)
	}
}
