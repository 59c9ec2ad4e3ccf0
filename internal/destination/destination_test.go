package destination_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

type fakeDest struct {
	name string
	g    destination.Guarantees
}

func (f fakeDest) Name() string                       { return f.name }
func (f fakeDest) Guarantees() destination.Guarantees { return f.g }
func (f fakeDest) Deliver(context.Context, destination.Request) (destination.Receipt, error) {
	return destination.Receipt{}, nil
}

type lookingDest struct {
	fakeDest
	rc  destination.Receipt
	err error
}

func (l lookingDest) Lookup(context.Context, destination.Request) (destination.Receipt, error) {
	return l.rc, l.err
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	r, err := destination.NewRegistry(fakeDest{name: "notify"}, fakeDest{name: "crm"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Names(), ","); got != "crm,notify" {
		t.Fatalf("names %s", got)
	}
	if d, err := r.Get("crm"); err != nil || d.Name() != "crm" {
		t.Fatalf("Get(crm) = %v, %v", d, err)
	}
	_, err = r.Get("https://evil.example/hook")
	var ue *destination.UnknownDestinationError
	if !errors.As(err, &ue) || retrypolicy.Classify(err).Class != retrypolicy.PermanentInput {
		t.Fatalf("unknown destination: %v", err)
	}
	if !strings.Contains(err.Error(), "crm, notify") {
		t.Errorf("error does not list the configured names: %v", err)
	}
	for name, ds := range map[string][]destination.Destination{
		"duplicate":    {fakeDest{name: "a"}, fakeDest{name: "a"}},
		"bad name":     {fakeDest{name: "Webhook"}},
		"empty name":   {fakeDest{name: ""}},
		"bad readback": {fakeDest{name: "a", g: destination.Guarantees{Readback: "sometimes"}}},
		"nil":          {nil},
	} {
		if _, err := destination.NewRegistry(ds...); err == nil {
			t.Errorf("%s: NewRegistry accepted it", name)
		}
	}
}

func TestRequestValidate(t *testing.T) {
	t.Parallel()
	payload := json.RawMessage(`{"text":"the secret summary"}`)
	sum := destination.HashPayload(payload)
	if len(sum) != 64 {
		t.Fatalf("hash %q", sum)
	}
	got, err := destination.Request{OperationID: "t1", Payload: payload}.Validate()
	if err != nil || got != sum {
		t.Fatalf("Validate without a hash = %q, %v", got, err)
	}
	if got, err := (destination.Request{OperationID: "t1", Payload: payload, PayloadSHA256: strings.ToUpper(sum)}).Validate(); err != nil || got != sum {
		t.Fatalf("Validate with the hash = %q, %v", got, err)
	}
	for name, r := range map[string]destination.Request{
		"no operation id": {Payload: payload},
		"bad payload":     {OperationID: "t1", Payload: json.RawMessage(`{"text":"the secret summary"`)},
		"empty payload":   {OperationID: "t1"},
		"other hash":      {OperationID: "t1", Payload: payload, PayloadSHA256: destination.HashPayload(json.RawMessage(`{}`))},
	} {
		_, err := r.Validate()
		if retrypolicy.Classify(err).Class != retrypolicy.PermanentInput {
			t.Errorf("%s: err %v, want permanent", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret summary") {
			t.Errorf("%s: error quotes the payload: %v", name, err)
		}
	}
}

func TestReceiptJSON(t *testing.T) {
	t.Parallel()
	raw, err := json.Marshal(destination.Receipt{OperationID: "t1", PayloadSHA256: "ab", Destination: "notify", DestinationIdentity: "sim:notify"})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"operation_id":"t1","payload_sha256":"ab","destination":"notify","destination_identity":"sim:notify"}`
	if string(raw) != want {
		t.Fatalf("receipt %s, want %s", raw, want)
	}
}

func TestGuaranteesOfAndLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := fakeDest{name: "x", g: destination.Guarantees{Idempotent: true}}
	if g, err := destination.GuaranteesOf(d, nil); err != nil || !g.Idempotent || g.Mode() != destination.ReadbackNone {
		t.Fatalf("GuaranteesOf = %+v, %v", g, err)
	}
	if _, err := destination.Lookup(ctx, d, destination.Request{}); !errors.Is(err, destination.ErrNoReadback) {
		t.Fatalf("Lookup without Looker = %v", err)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	req := destination.Request{OperationID: "op-1", Payload: json.RawMessage(`{}`)}
	byID := destination.Guarantees{Readback: destination.ReadbackByOperationID, NotFoundCredible: true}

	found := lookingDest{fakeDest{"a", byID}, destination.Receipt{OperationID: "op-1", ReadbackResult: destination.ReadbackFound}, nil}
	rc, dec, err := destination.Resolve(ctx, found, req, false)
	if err != nil || dec.Action != destination.Complete || rc.ReadbackResult != destination.ReadbackFound {
		t.Fatalf("found: %+v %+v %v", rc, dec, err)
	}
	absent := lookingDest{fakeDest{"a", byID}, destination.Receipt{}, destination.ErrNotFound}
	if _, dec, err := destination.Resolve(ctx, absent, req, false); err != nil || dec.Action != destination.Requeue {
		t.Fatalf("credible not found: %+v %v", dec, err)
	}
	boom := errors.New("lookup exploded")
	failing := lookingDest{fakeDest{"a", byID}, destination.Receipt{}, boom}
	if _, dec, err := destination.Resolve(ctx, failing, req, true); !errors.Is(err, boom) || dec.Action != destination.Park {
		t.Fatalf("failing lookup, exhausted: %+v %v", dec, err)
	}
	// A destination without readback is never asked, even if it has Lookup.
	blind := lookingDest{fakeDest{"a", destination.Guarantees{}}, destination.Receipt{OperationID: "op-1"}, nil}
	if _, dec, err := destination.Resolve(ctx, blind, req, false); err != nil || dec.Action != destination.Park || dec.Reason != destination.ReasonUnknownOutcome {
		t.Fatalf("no readback: %+v %v", dec, err)
	}
}
