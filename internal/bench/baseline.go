package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/soak"
)

// The baseline is what a careful team builds without a ledger: a producer
// sends the task on SQS, and an SQS-triggered Lambda (the same event source
// mapping) wraps the provider call in a Powertools-style idempotency record
// in DynamoDB: a conditional PutItem marks the payload's hash INPROGRESS,
// the handler runs, an UpdateItem stores the response and COMPLETED. A
// payload too large for a message goes through S3 as the SQS extended
// client does (PutObject by the producer, GetObject by the consumer).

// sqsInlineLimit is the largest message body the baseline sends inline
// (the SQS extended client's default threshold, 256 KB).
const sqsInlineLimit = 256 << 10

// Powertools' default attribute names.
const (
	ptID, ptExpiry, ptInProgress, ptStatus, ptData = "id", "expiration", "in_progress_expiration", "status", "data"
)

type baselineMessage struct {
	Input json.RawMessage `json:"input,omitempty"`
	// S3 points at an offloaded input (extended-client pattern).
	S3 *struct {
		Bucket string `json:"bucket"`
		Key    string `json:"key"`
	} `json:"s3,omitempty"`
}

type baseline struct {
	ddb      *dynamodb.Client
	s3       *s3.Client
	table    string
	provider contract.Provider
	now      func() time.Time
}

// handle is the consumer Lambda: partial batch responses, one idempotent
// provider call per record.
func (h *baseline) handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, rec := range ev.Records {
		if err := h.record(ctx, rec.Body); err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	return resp, nil
}

func (h *baseline) record(ctx context.Context, body string) error {
	id := "baseline#" + hashKey(body)
	now := h.now()
	_, err := h.ddb.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(h.table),
		Item: map[string]types.AttributeValue{
			ptID:         &types.AttributeValueMemberS{Value: id},
			ptExpiry:     &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
			ptInProgress: &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(15*time.Minute).UnixMilli(), 10)},
			ptStatus:     &types.AttributeValueMemberS{Value: "INPROGRESS"},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#id) OR #expiry < :now OR (#status = :inprogress AND attribute_exists(#ipe) AND #ipe < :now_ms)"),
		ExpressionAttributeNames: map[string]string{"#id": ptID, "#expiry": ptExpiry, "#status": ptStatus, "#ipe": ptInProgress},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now":        &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)},
			":now_ms":     &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
			":inprogress": &types.AttributeValueMemberS{Value: "INPROGRESS"},
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if s, ok := ccf.Item[ptStatus].(*types.AttributeValueMemberS); ok && s.Value == "COMPLETED" {
			return nil // already done: the stored response is the answer
		}
		return errors.New("bench: baseline: record in progress")
	}
	if err != nil {
		return err
	}
	var m baselineMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return err
	}
	input := m.Input
	if m.S3 != nil {
		out, err := h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(m.S3.Bucket), Key: aws.String(m.S3.Key)})
		if err != nil {
			return err
		}
		doc, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			return err
		}
		input = doc
	}
	res, err := h.provider.Generate(ctx, contract.Request{OperationID: id, Attempt: 1, Kind: contract.KindGenerate, Input: input})
	if err != nil {
		return err
	}
	_, err = h.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(h.table),
		Key:                      map[string]types.AttributeValue{ptID: &types.AttributeValueMemberS{Value: id}},
		UpdateExpression:         aws.String("SET #data = :data, #expiry = :expiry, #status = :status"),
		ExpressionAttributeNames: map[string]string{"#data": ptData, "#expiry": ptExpiry, "#status": ptStatus},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":data":   &types.AttributeValueMemberS{Value: string(res.Output)},
			":expiry": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
			":status": &types.AttributeValueMemberS{Value: "COMPLETED"},
		},
	})
	return err
}

func newS3(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = true
		o.DisableLogOutputChecksumValidationSkipped = true
	})
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// baselineCost runs tasks of workload w through the baseline on the
// emulator: its own idempotency table and (for large inputs) bucket, the
// rig's queue and the template's event source mapping.
func baselineCost(ctx context.Context, b *soak.Backend, w Workload, tasks int) (CostRow, error) {
	g, err := newCostRig(ctx, b, "benchbase")
	if err != nil {
		return CostRow{}, err
	}
	defer g.drop()
	clean := awsclient.DynamoDB(b.AWS)
	table := "bench-idempotency-" + randomSuffix()
	if _, err := clean.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(ptID), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(ptID), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil && !errors.As(err, new(*types.ResourceInUseException)) {
		// The name is random: "in use" is this create, retried by the SDK
		// after a reply it did not get (seen on a loaded moto).
		return CostRow{}, fmt.Errorf("bench: baseline table: %w", err)
	}
	defer func() {
		_, _ = clean.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	}()
	bucket := ""
	if w.InputBytes > sqsInlineLimit {
		bucket = "bench-baseline-" + randomSuffix()
		if _, err := newS3(b.AWS).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			return CostRow{}, fmt.Errorf("bench: baseline bucket: %w", err)
		}
		defer dropBucket(context.WithoutCancel(ctx), newS3(b.AWS), bucket)
	}
	h := &baseline{ddb: awsclient.DynamoDB(g.cfg["worker"]), s3: newS3(g.cfg["worker"]), table: table, provider: workloadProvider(w), now: time.Now}
	producerSQS, producerS3 := awsclient.SQS(g.cfg["submit"]), newS3(g.cfg["submit"])
	invocations, err := g.runConsumer(ctx, h.handle, tasks, func(ctx context.Context, settled func(int) error) error {
		for i := range tasks {
			in := prompt(w.InputBytes, i)
			var m baselineMessage
			if bucket != "" {
				key := "inputs/" + hashKey(in)
				if _, err := producerS3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(in)}); err != nil {
					return fmt.Errorf("bench: baseline put input: %w", err)
				}
				m.S3 = &struct {
					Bucket string `json:"bucket"`
					Key    string `json:"key"`
				}{bucket, key}
			} else {
				m.Input = json.RawMessage(in)
			}
			body, _ := json.Marshal(m)
			if _, err := producerSQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(g.env.Names.TaskQueueURL), MessageBody: aws.String(string(body))}); err != nil {
				return fmt.Errorf("bench: baseline send: %w", err)
			}
			if err := settled(i + 1); err != nil {
				return err
			}
		}
		return nil
	}, noBatchingWindow)
	if err != nil {
		return CostRow{}, err
	}
	// Every record must be COMPLETED, or the counts describe something else.
	out, err := clean.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return CostRow{}, err
	}
	done := 0
	for _, it := range out.Items {
		if s, ok := it[ptStatus].(*types.AttributeValueMemberS); ok && s.Value == "COMPLETED" {
			done++
		}
	}
	if done != tasks {
		return CostRow{}, fmt.Errorf("bench: baseline %s: %d of %d records completed", w.Name, done, tasks)
	}
	return g.row(SystemBaseline, w.Name, tasks, tasks, invocations)
}

func dropBucket(ctx context.Context, c *s3.Client, bucket string) {
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			break
		}
		for _, o := range page.Contents {
			_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key})
		}
	}
	_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
}
