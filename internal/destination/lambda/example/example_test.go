package example_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/internal/emutest"
	"github.com/taskledger/taskledger/internal/destination/lambda"
	"github.com/taskledger/taskledger/internal/destination/lambda/example"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestMain(m *testing.M) { emutest.Main(m) }

func deliverEvent(opID, payload string) lambda.Event {
	sum := sha256.Sum256([]byte(payload))
	return lambda.Event{Action: lambda.ActionDeliver, OperationID: opID, PayloadSHA256: hex.EncodeToString(sum[:]),
		Provenance: &destination.Provenance{Type: destination.ProvenanceDirect, Caller: "jwt:alice"}, Payload: json.RawMessage(payload)}
}

func TestHandlerActsOncePerOperationAndAnswersLookup(t *testing.T) {
	t.Parallel()
	store := example.NewMemory()
	h := &example.Handler{Store: store}
	ctx := context.Background()
	first, err := h.Handle(ctx, deliverEvent("op-1", `{"a":1}`))
	if err != nil || first.Receipt == "" || first.Duplicate {
		t.Fatalf("first delivery: %+v %v", first, err)
	}
	again, err := h.Handle(ctx, deliverEvent("op-1", `{"a":1}`))
	if err != nil || again.Receipt != first.Receipt || !again.Duplicate {
		t.Fatalf("repeated delivery: %+v %v, want the same receipt, marked duplicate", again, err)
	}
	if n := store.Acts(); n != 1 {
		t.Fatalf("acted %d times, want 1", n)
	}
	found, err := h.Handle(ctx, lambda.Event{Action: lambda.ActionLookup, OperationID: "op-1"})
	if err != nil || found.Found == nil || !*found.Found || found.Receipt != first.Receipt {
		t.Fatalf("lookup: %+v %v", found, err)
	}
	missing, err := h.Handle(ctx, lambda.Event{Action: lambda.ActionLookup, OperationID: "op-2"})
	if err != nil || missing.Found == nil || *missing.Found {
		t.Fatalf("lookup of an unknown operation: %+v %v", missing, err)
	}
}

func TestHandlerRejectsWithoutActing(t *testing.T) {
	t.Parallel()
	store := example.NewMemory()
	h := &example.Handler{Store: store}
	ctx := context.Background()
	if _, err := h.Handle(ctx, deliverEvent("op-1", `{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	badHash := deliverEvent("op-3", `{"a":1}`)
	badHash.PayloadSHA256 = "00"
	noProv := deliverEvent("op-4", `{"a":1}`)
	noProv.Provenance = nil
	for name, ev := range map[string]lambda.Event{
		"another payload under a used operation id": deliverEvent("op-1", `{"a":2}`),
		"a payload that is not its hash":            badHash,
		"no provenance":                             noProv,
		"no operation id":                           {Action: lambda.ActionDeliver},
		"an unknown action":                         {Action: "delete", OperationID: "op-1"},
	} {
		_, err := h.Handle(ctx, ev)
		var r *example.Rejected
		if !errors.As(err, &r) {
			t.Errorf("%s: %v, want *Rejected (errorType Rejected)", name, err)
		}
	}
	if n := store.Acts(); n != 1 {
		t.Fatalf("acted %d times, want only the first delivery", n)
	}
}

// The DynamoDB store's conditional put, on both engines: of concurrent
// deliveries of one operation exactly one acts, and all answer its receipt.
func TestDynamoDBStoreRecordsEachOperationOnce(t *testing.T) {
	emutest.Each(t, func(t *testing.T, be emutest.Backend) {
		ctx := context.Background()
		ddb := awsclient.DynamoDB(be.AWS)
		table := testenv.UniquePrefix() + "-example"
		if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(table),
			AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("operation_id"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
			KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("operation_id"), KeyType: ddbtypes.KeyTypeHash}},
			BillingMode:          ddbtypes.BillingModePayPerRequest,
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		})
		h := &example.Handler{Store: &example.DynamoDB{Client: ddb, ExampleDestinationTable: table}}

		const n = 6
		replies := make([]example.Reply, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { replies[i], errs[i] = h.Handle(ctx, deliverEvent("op-c", `{"order":4711}`)) })
		}
		wg.Wait()
		created := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("delivery %d: %v", i, errs[i])
			}
			if replies[i].Receipt != replies[0].Receipt {
				t.Fatalf("receipts differ: %q vs %q", replies[i].Receipt, replies[0].Receipt)
			}
			if !replies[i].Duplicate {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("%d deliveries acted, want exactly 1", created)
		}
		got, err := h.Handle(ctx, lambda.Event{Action: lambda.ActionLookup, OperationID: "op-c"})
		if err != nil || got.Found == nil || !*got.Found || got.Receipt != replies[0].Receipt {
			t.Fatalf("lookup: %+v %v", got, err)
		}
		none, err := h.Handle(ctx, lambda.Event{Action: lambda.ActionLookup, OperationID: "op-none"})
		if err != nil || none.Found == nil || *none.Found {
			t.Fatalf("lookup of nothing: %+v %v", none, err)
		}
		if _, err := h.Handle(ctx, deliverEvent("op-c", `{"order":4712}`)); !errors.As(err, new(*example.Rejected)) {
			t.Fatalf("another payload under a used id: %v, want rejected", err)
		}
	})
}
