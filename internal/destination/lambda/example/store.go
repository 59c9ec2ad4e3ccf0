package example

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Memory is an in-memory Store (local runs, tests). Safe for concurrent use.
type Memory struct {
	mu   sync.Mutex
	recs map[string]Record
	puts int
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{recs: map[string]Record{}} }

// Put records rec unless its operation id is there.
func (m *Memory) Put(_ context.Context, rec Record) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.recs[rec.OperationID]; ok {
		return old, false, nil
	}
	m.recs[rec.OperationID] = rec
	m.puts++
	return rec, true, nil
}

// Get reads a record.
func (m *Memory) Get(_ context.Context, opID string) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[opID]
	return r, ok, nil
}

// Acts returns how many records were created: the function's side effects.
func (m *Memory) Acts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.puts
}

// DynamoDB is the deployed Store: one item per operation id in a table whose
// partition key is operation_id (S).
type DynamoDB struct {
	Client *dynamodb.Client
	// ExampleDestinationTable is the table's name (template.yaml's
	// ExampleDestinationTable; the field is named after the logical id, so
	// internal/templatetest can match the calls to the function's policy).
	ExampleDestinationTable string
}

// Attribute names of a record item.
const (
	attrOperationID = "operation_id"
	attrReceipt     = "receipt"
	attrPayloadHash = "payload_sha256"
	attrProvenance  = "provenance_type"
	attrCorrelation = "correlation_id"
	attrReceivedAt  = "received_at"
)

// Put is one conditional PutItem (attribute_not_exists(operation_id)). A
// failed condition returns the existing item (ALL_OLD; a consistent
// GetItem where the engine omits it).
func (d *DynamoDB) Put(ctx context.Context, rec Record) (Record, bool, error) {
	item := map[string]ddbtypes.AttributeValue{
		attrOperationID: &ddbtypes.AttributeValueMemberS{Value: rec.OperationID},
		attrReceipt:     &ddbtypes.AttributeValueMemberS{Value: rec.Receipt},
		attrPayloadHash: &ddbtypes.AttributeValueMemberS{Value: rec.PayloadSHA256},
		attrProvenance:  &ddbtypes.AttributeValueMemberS{Value: rec.ProvenanceType},
		attrReceivedAt:  &ddbtypes.AttributeValueMemberS{Value: rec.ReceivedAt.Format(time.RFC3339Nano)},
	}
	if rec.CorrelationID != "" {
		item[attrCorrelation] = &ddbtypes.AttributeValueMemberS{Value: rec.CorrelationID}
	}
	_, err := d.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(d.ExampleDestinationTable),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(#id)"),
		ExpressionAttributeNames:            map[string]string{"#id": attrOperationID},
		ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return rec, true, nil
	}
	var ccf *ddbtypes.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) > 0 {
			return recordOf(ccf.Item), false, nil
		}
		old, found, gerr := d.Get(ctx, rec.OperationID)
		if gerr != nil {
			return Record{}, false, fmt.Errorf("read the existing record: %w", gerr)
		}
		if !found {
			return Record{}, false, errors.New("the condition failed but no record exists")
		}
		return old, false, nil
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded", "TransactionConflictException":
			return Record{}, false, fmt.Errorf("%w: %w", ErrStoreBusy, err)
		}
	}
	return Record{}, false, err
}

// Get is a consistent GetItem.
func (d *DynamoDB) Get(ctx context.Context, opID string) (Record, bool, error) {
	out, err := d.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(d.ExampleDestinationTable),
		Key:            map[string]ddbtypes.AttributeValue{attrOperationID: &ddbtypes.AttributeValueMemberS{Value: opID}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Record{}, false, err
	}
	if len(out.Item) == 0 {
		return Record{}, false, nil
	}
	return recordOf(out.Item), true, nil
}

func recordOf(item map[string]ddbtypes.AttributeValue) Record {
	s := func(k string) string {
		if v, ok := item[k].(*ddbtypes.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	at, _ := time.Parse(time.RFC3339Nano, s(attrReceivedAt))
	return Record{OperationID: s(attrOperationID), Receipt: s(attrReceipt), PayloadSHA256: s(attrPayloadHash),
		ProvenanceType: s(attrProvenance), CorrelationID: s(attrCorrelation), ReceivedAt: at}
}
