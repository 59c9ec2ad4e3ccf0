//go:build linux

package lambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/lambda"
	"github.com/taskledger/taskledger/internal/lambdarie"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// startExample builds functions/exampledestination and runs it under RIE,
// or skips (fails with TASKLEDGER_REQUIRE_RIE=1) when RIE cannot be built.
func startExample(t *testing.T) *lambdarie.Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rie, err := lambdarie.Install(ctx, t.TempDir())
	if err != nil {
		if os.Getenv("TASKLEDGER_REQUIRE_RIE") == "1" {
			t.Fatalf("aws-lambda-rie is required (TASKLEDGER_REQUIRE_RIE=1): %v", err)
		}
		t.Skipf("aws-lambda-rie unavailable: %v", err)
	}
	tpl, err := stack.Find()
	if err != nil {
		t.Fatal(err)
	}
	bootstrap, err := lambdarie.Build(ctx, filepath.Dir(tpl), "./functions/exampledestination", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := lambdarie.Start(ctx, rie, bootstrap, lambdarie.Function{Name: "ExampleDestinationFunction", Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// The example function, built as deployed and run under the Runtime
// Interface Emulator, reached through the SDK's Invoke by the lambda
// destination: it acts once per operation id and answers the readback.
func TestExampleFunctionUnderRIEActsOncePerOperation(t *testing.T) {
	t.Parallel()
	p := startExample(t)
	client := awslambda.New(awslambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(p.URL),
		Credentials: aws.AnonymousCredentials{}})
	d, err := lambda.New(lambda.Options{Client: client, Functions: map[string]lambda.Function{
		"example": {FunctionName: lambdarie.FunctionName, Lookup: true, NotFoundCredible: true, Timeout: 10 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := destination.Request{OperationID: "t_rie1", Attempt: 1, Destination: lambda.Name, Params: json.RawMessage(`{"function":"example"}`),
		Payload: json.RawMessage(`{"text":"hello"}`), Provenance: &destination.Provenance{Type: destination.ProvenanceDirect, Caller: "anonymous"}}

	// Not delivered yet: the readback credibly says so.
	if _, err := d.Lookup(ctx, r); !errors.Is(err, destination.ErrNotFound) {
		t.Fatalf("lookup before delivery: %v, want ErrNotFound", err)
	}
	first, err := d.Deliver(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if first.ProviderRef == "" || first.DestinationIdentity != lambdarie.FunctionName {
		t.Fatalf("receipt = %+v", first)
	}
	// A repeated delivery of the operation answers the same receipt; the
	// function says it did not act again.
	again, err := d.Deliver(ctx, r)
	if err != nil || again.ProviderRef != first.ProviderRef {
		t.Fatalf("repeated delivery: %+v %v, want receipt %s", again, err, first.ProviderRef)
	}
	if reply := invoke(t, p, r); reply["duplicate"] != true || reply["receipt"] != first.ProviderRef {
		t.Fatalf("a third delivery's raw reply = %v, want duplicate with the first receipt", reply)
	}
	found, err := d.Lookup(ctx, r)
	if err != nil || found.ProviderRef != first.ProviderRef || found.ReadbackResult != destination.ReadbackFound {
		t.Fatalf("lookup: %+v %v", found, err)
	}
	// The contract's refusal crosses the runtime as errorType "Rejected".
	other := r
	other.Payload = json.RawMessage(`{"text":"something else"}`)
	if _, err := d.Deliver(ctx, other); retrypolicy.Classify(err).Class != retrypolicy.PermanentInput {
		t.Fatalf("another payload under a used operation id: %v, want permanent", err)
	}
}

// invoke sends r's deliver event straight to RIE and returns the reply.
func invoke(t *testing.T, p *lambdarie.Process, r destination.Request) map[string]any {
	t.Helper()
	ev, _ := json.Marshal(lambda.Event{Action: lambda.ActionDeliver, OperationID: r.OperationID, PayloadSHA256: destination.HashPayload(r.Payload),
		Provenance: r.Provenance, Params: r.Params, Payload: r.Payload})
	resp, err := http.Post(p.InvokeURL, "application/json", bytes.NewReader(ev))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("reply %s: %v", b, err)
	}
	return out
}
