package deliver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func registry(t *testing.T, c *clock, o dsim.Options) (*deliver.Registry, map[string]*dsim.Destination) {
	t.Helper()
	o.Now = c.Now
	reg, err := deliver.NewRegistry(dsim.All(o)...)
	if err != nil {
		t.Fatal(err)
	}
	return reg, reg.Sims
}

func task(id, input string) deliver.Task {
	return deliver.Task{TaskID: id, Input: input, Provenance: &destination.Provenance{Type: destination.ProvenanceDirect, Caller: "anonymous"}}
}

// The step's readback speaks Decide's rule in the provider's vocabulary.
func TestLookupFollowsDecide(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}

	t.Run("found", func(t *testing.T) {
		reg, sims := registry(t, c, dsim.Options{})
		p := deliver.Bind(reg, task("t_1", `{"destination":"notify","params":{"to":"a@example.com"},"payload":{"x":1}}`))
		sims[dsim.Notify].Script("t_1", dsim.AcceptLoseReply)
		if _, err := p.Generate(ctx, contract.Request{OperationID: "t_1", Attempt: 1}); retrypolicy.Classify(err).Class != retrypolicy.UnknownOutcome {
			t.Fatalf("lost reply: %v, want uncertain", err)
		}
		res, err := p.(contract.Looker).Lookup(ctx, "t_1")
		if err != nil {
			t.Fatal(err)
		}
		rc, ok := deliver.ReceiptOf(string(res.Output))
		if !ok || rc.OperationID != "t_1" || rc.ReadbackResult != destination.ReadbackFound || rc.PayloadSHA256 != destination.HashPayload(json.RawMessage(`{"x":1}`)) || res.Provider != dsim.Notify {
			t.Fatalf("readback receipt %+v (%+v)", rc, res)
		}
	})
	t.Run("credible not found re-queues", func(t *testing.T) {
		reg, _ := registry(t, c, dsim.Options{})
		p := deliver.Bind(reg, task("t_2", `{"destination":"crm","payload":{"x":1}}`))
		if _, err := p.(contract.Looker).Lookup(ctx, "t_2"); !errors.Is(err, contract.ErrNotFound) || !errors.Is(err, deliver.ErrAbsent) {
			t.Fatalf("credible not found: %v, want contract.ErrNotFound and deliver.ErrAbsent", err)
		}
	})
	t.Run("lagging not found is read again", func(t *testing.T) {
		reg, _ := registry(t, c, dsim.Options{ReadbackDelay: time.Minute})
		p := deliver.Bind(reg, task("t_3", `{"destination":"publish","params":{"slug":"s"},"payload":{"x":1}}`))
		_, err := p.(contract.Looker).Lookup(ctx, "t_3")
		if !errors.Is(err, deliver.ErrNotYetVisible) || errors.Is(err, contract.ErrNotFound) || errors.Is(err, contract.ErrNoReadback) {
			t.Fatalf("lagging not found: %v, want ErrNotYetVisible only", err)
		}
	})
	t.Run("no readback parks", func(t *testing.T) {
		reg, _ := registry(t, c, dsim.Options{Guarantees: &destination.Guarantees{Readback: destination.ReadbackNone}})
		p := deliver.Bind(reg, task("t_4", `{"destination":"notify","params":{"to":"a@example.com"},"payload":{"x":1}}`))
		if _, err := p.(contract.Looker).Lookup(ctx, "t_4"); !errors.Is(err, contract.ErrNoReadback) || !strings.Contains(err.Error(), "not idempotent") {
			t.Fatalf("no readback: %v, want contract.ErrNoReadback with Decide's reason", err)
		}
		if contract.OffersReadback(p) {
			t.Fatal("a destination without readback offers one")
		}
	})
	t.Run("idempotent without readback re-queues", func(t *testing.T) {
		reg, _ := registry(t, c, dsim.Options{Guarantees: &destination.Guarantees{Idempotent: true, Readback: destination.ReadbackNone}})
		p := deliver.Bind(reg, task("t_5", `{"destination":"notify","params":{"to":"a@example.com"},"payload":{"x":1}}`))
		if _, err := p.(contract.Looker).Lookup(ctx, "t_5"); !errors.Is(err, contract.ErrNotFound) || errors.Is(err, deliver.ErrAbsent) {
			t.Fatalf("idempotent: %v, want contract.ErrNotFound (re-send is harmless) without ErrAbsent (nothing proves absence)", err)
		}
		if ih, ok := p.(contract.IdempotencyHonouring); !ok || !ih.HonoursIdempotencyKey() {
			t.Fatal("an idempotent destination's step does not say so")
		}
	})
}

// A task that cannot be bound refuses every call: bad input fails it,
// a destination no longer configured parks it; nothing is delivered.
func TestBindRefusals(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Now()}
	reg, sims := registry(t, c, dsim.Options{})
	for _, tc := range []struct {
		name, input string
		reg         *deliver.Registry
		class       retrypolicy.Class
	}{
		{"bad input", `{"destination":"notify"}`, reg, retrypolicy.PermanentInput},
		{"unknown destination", `{"destination":"fax","payload":{}}`, reg, retrypolicy.PermanentConfig},
		{"no registry", `{"destination":"notify","params":{"to":"a@example.com"},"payload":{}}`, nil, retrypolicy.PermanentConfig},
	} {
		p := deliver.Bind(tc.reg, task("t_x", tc.input))
		_, err := p.Generate(ctx, contract.Request{OperationID: "t_x"})
		if got := retrypolicy.Classify(err).Class; got != tc.class {
			t.Errorf("%s: class %s (%v), want %s", tc.name, got, err, tc.class)
		}
		if _, err := p.(contract.Looker).Lookup(ctx, "t_x"); !errors.Is(err, contract.ErrNoReadback) {
			t.Errorf("%s: lookup %v, want ErrNoReadback", tc.name, err)
		}
	}
	if n := sims[dsim.Notify].TotalSideEffects(); n != 0 {
		t.Fatalf("%d side effects from refused steps", n)
	}
}

func TestParseConfigAndBuild(t *testing.T) {
	c, err := deliver.ParseConfig(`{"simulated":{"names":["notify","publish"],"seed":3,"faults":"throttle=0.5","readback_delay":"10s"}}`)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := deliver.Build(c, deliver.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(reg.Names(), ","); got != "notify,publish" {
		t.Fatalf("names %q", got)
	}
	if g := reg.Sims[dsim.Publish].Guarantees(); g.NotFoundCredible {
		t.Fatalf("a delayed readback declared credible: %s", g)
	}
	if err := reg.Check(destination.DeliverInput{Destination: "crm", Params: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("an unregistered destination passed the check")
	}
	if err := reg.Check(destination.DeliverInput{Destination: "notify", Params: json.RawMessage(`{"to":""}`)}); err == nil {
		t.Fatal("notify params without a recipient passed the check")
	}
	if empty, err := deliver.ParseConfig(""); err != nil || empty.Simulated != nil {
		t.Fatalf("empty config: %+v %v", empty, err)
	}
	for _, bad := range []string{
		`{"simulated":{"nmes":["notify"]}}`,
		`{"simulated":{}} {}`,
		`[]`,
	} {
		if _, err := deliver.ParseConfig(bad); err == nil {
			t.Errorf("ParseConfig(%s) accepted", bad)
		}
	}
	for _, bad := range []deliver.Config{
		{Simulated: &deliver.SimulatedConfig{Faults: "explode=1"}},
		{Simulated: &deliver.SimulatedConfig{ReadbackDelay: "soon"}},
		{Simulated: &deliver.SimulatedConfig{Names: []string{"fax"}}},
		{Webhooks: map[string]deliver.WebhookEndpoint{"crm": {URL: "https://crm.example.com", SecretID: "s"}}}, // no secrets client
		{EventBridge: &deliver.EventBridgeConfig{BusARN: "arn:aws:events:us-east-1:123456789012:event-bus/b"}}, // no client
	} {
		if _, err := deliver.Build(bad, deliver.Deps{}); err == nil {
			t.Errorf("Build(%+v) accepted", bad)
		}
	}
	cw, _ := deliver.ParseConfig(`{"webhooks":{"a":{"url":"https://a.example.com","secret_id":"arn:s:2"},"b":{"url":"https://b.example.com","secret_id":"arn:s:1"}}}`)
	if got := strings.Join(cw.WebhookSecretIDs(), ","); got != "arn:s:1,arn:s:2" {
		t.Fatalf("secret ids %q", got)
	}
}

// The checker the submit function builds refuses, before anything is
// written, a lambda function or an email recipient configuration does not
// name — and it could not invoke or send even if asked.
func TestCheckerRefusesUnconfiguredFunctionsAndRecipients(t *testing.T) {
	c, err := deliver.ParseConfig(`{"lambda":{"functions":{"orders":{"function":"arn:aws:lambda:us-east-1:123456789012:function:orders","lookup":true,"timeout":"20s"}}},
		"email":{"from":"noreply@example.com","allowed_recipients":["ops@example.com","@team.example.org"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := deliver.BuildChecker(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(reg.Names(), ","); got != "email,lambda" {
		t.Fatalf("names %q", got)
	}
	for _, in := range []destination.DeliverInput{
		{Destination: "lambda", Params: json.RawMessage(`{"function":"arn:aws:lambda:us-east-1:123456789012:function:other"}`)},
		{Destination: "email", Params: json.RawMessage(`{"to":["eve@evil.example"]}`)},
	} {
		var pe *destination.ParamsError
		if err := reg.Check(in); !errors.As(err, &pe) {
			t.Errorf("Check(%s %s) = %v, want a ParamsError", in.Destination, in.Params, err)
		}
	}
	for _, in := range []destination.DeliverInput{
		{Destination: "lambda", Params: json.RawMessage(`{"function":"orders"}`)},
		{Destination: "email", Params: json.RawMessage(`{"to":["dana@team.example.org"]}`)},
	} {
		if err := reg.Check(in); err != nil {
			t.Errorf("Check(%s %s) = %v, want accepted", in.Destination, in.Params, err)
		}
	}
	if got := strings.Join(c.LambdaFunctionNames(), ","); got != "arn:aws:lambda:us-east-1:123456789012:function:orders" {
		t.Fatalf("function names %q", got)
	}
	for _, bad := range []deliver.Config{
		{Lambda: &deliver.LambdaConfig{Functions: map[string]deliver.LambdaFunction{"orders": {Function: "orders"}}}}, // no client
		{Email: &deliver.EmailConfig{From: "noreply@example.com", AllowedRecipients: []string{"ops@example.com"}}},    // no client
	} {
		if _, err := deliver.Build(bad, deliver.Deps{}); err == nil {
			t.Errorf("Build(%+v) accepted", bad)
		}
	}
	if _, err := deliver.BuildChecker(deliver.Config{Lambda: &deliver.LambdaConfig{Functions: map[string]deliver.LambdaFunction{"orders": {Function: "orders", Timeout: "soon"}}}}); err == nil {
		t.Error("a bad lambda timeout was accepted")
	}
}
