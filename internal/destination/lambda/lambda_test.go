package lambda_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/lambda"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

const payload = `{"order":"order-4711",  "summary":"private text 0451"}`

func req(opID string) destination.Request {
	return destination.Request{OperationID: opID, Attempt: 2, Destination: lambda.Name,
		Params: json.RawMessage(`{"function":"orders","args":{"priority":"high"}}`), Payload: json.RawMessage(payload), CorrelationID: "corr-1",
		Provenance: &destination.Provenance{Type: destination.ProvenanceDirect, Caller: "jwt:alice"}}
}

func class(err error) retrypolicy.Class { return retrypolicy.Classify(err).Class }

// fakeLambda is the Lambda Invoke API on an httptest server: each request
// is recorded and answered by answer (a 200 with the reply by default).
type fakeLambda struct {
	mu     sync.Mutex
	calls  []call
	answer func(w http.ResponseWriter, c call)
}

type call struct {
	Path  string
	Event lambda.Event
	Raw   []byte
}

func (f *fakeLambda) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	c := call{Path: r.URL.Path, Raw: raw}
	_ = json.Unmarshal(raw, &c.Event)
	f.mu.Lock()
	f.calls = append(f.calls, c)
	answer := f.answer
	f.mu.Unlock()
	answer(w, c)
}

func (f *fakeLambda) Calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func reply(body string) func(http.ResponseWriter, call) {
	return func(w http.ResponseWriter, _ call) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

func functionError(kind, errorType string) func(http.ResponseWriter, call) {
	return func(w http.ResponseWriter, _ call) {
		w.Header().Set("X-Amz-Function-Error", kind)
		_, _ = io.WriteString(w, `{"errorType":"`+errorType+`","errorMessage":"secret reason 0451"}`)
	}
}

func serviceError(status int, code string, headers ...string) func(http.ResponseWriter, call) {
	return func(w http.ResponseWriter, _ call) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("X-Amzn-ErrorType", code)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"Type":"User","message":"refused"}`)
	}
}

type bundle struct {
	fake *fakeLambda
	dest *lambda.Destination
	srv  *httptest.Server
}

func setup(t *testing.T, fns map[string]lambda.Function) *bundle {
	t.Helper()
	f := &fakeLambda{answer: reply(`{"receipt":"rcpt-1"}`)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client := awslambda.New(awslambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 5})
	if fns == nil {
		fns = map[string]lambda.Function{"orders": {FunctionName: "arn:aws:lambda:us-east-1:123456789012:function:orders", Lookup: true, NotFoundCredible: true}}
	}
	d, err := lambda.New(lambda.Options{Functions: fns, Client: client, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{fake: f, dest: d, srv: srv}
}

func TestDeliverInvokesTheConfiguredFunctionWithTheEventAndReturnsItsReceipt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	rc, err := b.dest.Deliver(context.Background(), req("op-1"))
	if err != nil {
		t.Fatal(err)
	}
	want := destination.Receipt{OperationID: "op-1", PayloadSHA256: destination.HashPayload(json.RawMessage(payload)), Destination: "lambda",
		DestinationIdentity: "arn:aws:lambda:us-east-1:123456789012:function:orders", ProviderRef: "rcpt-1"}
	if rc != want {
		t.Fatalf("receipt = %+v, want %+v", rc, want)
	}
	calls := b.fake.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d invokes, want 1", len(calls))
	}
	c := calls[0]
	if !strings.Contains(c.Path, "function:orders/invocations") {
		t.Errorf("invoked %s, want the configured function", c.Path)
	}
	ev := c.Event
	if ev.Action != "deliver" || ev.OperationID != "op-1" || ev.Attempt != 2 || ev.PayloadSHA256 != want.PayloadSHA256 || ev.CorrelationID != "corr-1" {
		t.Errorf("event = %+v", ev)
	}
	// The payload's exact bytes, so payload_sha256 is the hash of what the
	// function received.
	if string(ev.Payload) != payload {
		t.Errorf("payload = %s, want the submitted bytes %s", ev.Payload, payload)
	}
	if string(ev.Params) != `{"function":"orders","args":{"priority":"high"}}` {
		t.Errorf("params = %s", ev.Params)
	}
	if ev.Provenance == nil || ev.Provenance.Type != "direct" || ev.Provenance.Caller != "jwt:alice" {
		t.Errorf("provenance = %+v", ev.Provenance)
	}
}

func TestDeliverStepsEachOutcome(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		answer func(http.ResponseWriter, call)
		want   retrypolicy.Class
	}{
		{"a Rejected function error is the request's fault", functionError("Unhandled", "Rejected"), retrypolicy.PermanentInput},
		{"a Retryable function error did not act", functionError("Unhandled", "Retryable"), retrypolicy.Transient},
		{"a Handled Rejected error is the request's fault too", functionError("Handled", "Rejected"), retrypolicy.PermanentInput},
		{"a crash may have acted", functionError("Unhandled", "Runtime.ExitError"), retrypolicy.UnknownOutcome},
		{"a timeout may have acted", functionError("Unhandled", "Sandbox.Timedout"), retrypolicy.UnknownOutcome},
		{"an error of another type may have acted", functionError("Unhandled", "errorString"), retrypolicy.UnknownOutcome},
		{"a reply without a receipt may have acted", reply(`{"ok":true}`), retrypolicy.UnknownOutcome},
		{"a Rejected error returned as the reply (as RIE answers) is the request's fault", reply(`{"errorType":"Rejected","errorMessage":"no"}`), retrypolicy.PermanentInput},
		{"a Retryable error returned as the reply did not act", reply(`{"errorType":"Retryable"}`), retrypolicy.Transient},
		{"a crash reported without the header may have acted", reply(`{"errorType":"Runtime.ExitError"}`), retrypolicy.UnknownOutcome},
		{"a reply that is not JSON may have acted", reply(`null`), retrypolicy.UnknownOutcome},
		{"throttled: Lambda did not run it", serviceError(429, "TooManyRequestsException"), retrypolicy.Transient},
		{"a function being updated is retried", serviceError(409, "ResourceConflictException"), retrypolicy.Transient},
		{"a missing function is configuration", serviceError(404, "ResourceNotFoundException"), retrypolicy.PermanentConfig},
		{"no permission is configuration", serviceError(403, "AccessDeniedException"), retrypolicy.PermanentConfig},
		{"a KMS failure is configuration", serviceError(502, "KMSAccessDeniedException"), retrypolicy.PermanentConfig},
		{"an event too large is the request's fault", serviceError(413, "RequestTooLargeException"), retrypolicy.PermanentInput},
		{"Lambda's own failure may come after the function ran", serviceError(500, "ServiceException"), retrypolicy.UnknownOutcome},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.fake.answer = tc.answer
			_, err := b.dest.Deliver(context.Background(), req("op-1"))
			if got := class(err); got != tc.want {
				t.Fatalf("class = %v (%v), want %v", got, err, tc.want)
			}
			if n := len(b.fake.Calls()); n != 1 {
				t.Fatalf("%d invokes, want exactly 1 (the SDK must not retry an invoke)", n)
			}
			if err != nil && strings.Contains(err.Error(), "0451") {
				t.Errorf("error %q quotes the payload or the function's message", err)
			}
		})
	}
}

func TestThrottledInvokeHonoursRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.fake.answer = func(w http.ResponseWriter, _ call) {
		w.Header().Set("X-Amzn-ErrorType", "TooManyRequestsException")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(429)
		_, _ = io.WriteString(w, `{"Reason":"ReservedFunctionConcurrentInvocationLimitExceeded","message":"Rate exceeded"}`)
	}
	_, err := b.dest.Deliver(context.Background(), req("op-1"))
	c := retrypolicy.Classify(err)
	if c.Class != retrypolicy.Transient || c.RetryAfter != 7*time.Second {
		t.Fatalf("classification = %+v (%v), want transient after 7s", c, err)
	}
}

func TestLostReplyIsUncertainAndSentOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]lambda.Function{"orders": {FunctionName: "orders", Timeout: 300 * time.Millisecond}})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	b.fake.answer = func(http.ResponseWriter, call) { <-release } // the function ran; the reply never comes
	_, err := b.dest.Deliver(context.Background(), req("op-1"))
	if class(err) != retrypolicy.UnknownOutcome {
		t.Fatalf("class = %v (%v), want unknown", class(err), err)
	}
	if n := len(b.fake.Calls()); n != 1 {
		t.Fatalf("%d invokes, want 1", n)
	}
}

func TestAnInvokeThatNeverConnectedIsRetryable(t *testing.T) {
	t.Parallel()
	// Port 1 of the loopback: nothing listens there, so the connection is
	// refused. (A port freed after a listen can be taken again at once by a
	// parallel test's server, whose reset of the request is no longer a
	// "never connected".)
	addr := "127.0.0.1:1"
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("something listens on %s; the test needs a refused connection", addr)
	}
	client := awslambda.New(awslambda.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + addr), Credentials: aws.AnonymousCredentials{}})
	d, err := lambda.New(lambda.Options{Functions: map[string]lambda.Function{"orders": {FunctionName: "orders"}}, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Deliver(context.Background(), req("op-1"))
	if class(err) != retrypolicy.Transient || !errors.Is(err, retrypolicy.ErrRequestNotSent) {
		t.Fatalf("err = %v (class %v), want transient, not sent", err, class(err))
	}
}

func TestParamsNameAConfiguredFunctionNeverAnARN(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	cases := map[string]string{
		`{}`: "function: is required",
		`{"function":"arn:aws:lambda:us-east-1:999999999999:function:evil"}`: `no function "arn:aws:lambda:us-east-1:999999`,
		`{"function":"billing"}`:          `no function "billing" is configured (configured: orders)`,
		`{"function":"orders","args":1}`:  "args",
		`{"function":"orders","url":"x"}`: "unknown field",
	}
	for params, want := range cases {
		err := b.dest.CheckParams(json.RawMessage(params))
		var pe *destination.ParamsError
		if !errors.As(err, &pe) || class(err) != retrypolicy.PermanentInput || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckParams(%s) = %v, want a permanent ParamsError saying %q", params, err, want)
		}
		r := req("op-1")
		r.Params = json.RawMessage(params)
		if _, err := b.dest.Deliver(context.Background(), r); class(err) != retrypolicy.PermanentInput {
			t.Errorf("Deliver with %s: %v, want refused", params, err)
		}
	}
	if n := len(b.fake.Calls()); n != 0 {
		t.Fatalf("%d invokes for refused params, want 0", n)
	}
	if err := b.dest.CheckParams(json.RawMessage(`{"function":"orders"}`)); err != nil {
		t.Fatalf("valid params refused: %v", err)
	}
}

func TestGuaranteesArePerFunction(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]lambda.Function{
		"orders": {FunctionName: "orders", Lookup: true, NotFoundCredible: true},
		"plain":  {FunctionName: "plain"},
		"dedup":  {FunctionName: "dedup", Idempotent: true},
	})
	for name, want := range map[string]destination.Guarantees{
		"orders": {Readback: destination.ReadbackByOperationID, NotFoundCredible: true},
		"plain":  {Readback: destination.ReadbackNone},
		"dedup":  {Idempotent: true, Readback: destination.ReadbackNone},
	} {
		g, err := b.dest.GuaranteesFor(json.RawMessage(`{"function":"` + name + `"}`))
		if err != nil || g != want {
			t.Errorf("%s: guarantees %+v, %v; want %+v", name, g, err, want)
		}
	}
	if g := b.dest.Guarantees(); g != (destination.Guarantees{}) {
		t.Errorf("Guarantees() without a function = %+v, want none", g)
	}
}

func TestLookupAsksTheFunctionByOperationID(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.fake.answer = reply(`{"found":true,"receipt":"rcpt-9"}`)
	rc, err := b.dest.Lookup(context.Background(), req("op-7"))
	if err != nil {
		t.Fatal(err)
	}
	if rc.ReadbackResult != destination.ReadbackFound || rc.ProviderRef != "rcpt-9" || rc.OperationID != "op-7" || rc.ReadbackAt.IsZero() {
		t.Fatalf("receipt = %+v", rc)
	}
	c := b.fake.Calls()[0]
	if c.Event.Action != "lookup" || c.Event.OperationID != "op-7" || c.Event.Payload != nil {
		t.Fatalf("lookup event = %s, want only the action and the operation id", c.Raw)
	}

	b.fake.answer = reply(`{"found":false}`)
	if _, err := b.dest.Lookup(context.Background(), req("op-7")); !errors.Is(err, destination.ErrNotFound) {
		t.Fatalf("not found: %v, want ErrNotFound", err)
	}
	// A failed lookup is safe to repeat: retryable, never uncertain.
	b.fake.answer = functionError("Unhandled", "Runtime.ExitError")
	if _, err := b.dest.Lookup(context.Background(), req("op-7")); class(err) != retrypolicy.Transient {
		t.Fatalf("failed lookup: %v (%v), want transient", err, class(err))
	}
	b.fake.answer = reply(`{"receipt":"x"}`)
	if _, err := b.dest.Lookup(context.Background(), req("op-7")); class(err) != retrypolicy.PermanentConfig {
		t.Fatalf("a reply without found: %v (%v), want misconfigured", err, class(err))
	}
}

func TestAFunctionWithoutLookupHasNoReadback(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]lambda.Function{"orders": {FunctionName: "orders"}})
	if _, err := b.dest.Lookup(context.Background(), req("op-1")); !errors.Is(err, destination.ErrNoReadback) {
		t.Fatalf("Lookup = %v, want ErrNoReadback", err)
	}
	if n := len(b.fake.Calls()); n != 0 {
		t.Fatalf("%d invokes, want 0", n)
	}
}

func TestNewRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	client := awslambda.New(awslambda.Options{Region: "us-east-1"})
	for name, fns := range map[string]map[string]lambda.Function{
		"none":                      {},
		"bad name":                  {"Orders": {FunctionName: "orders"}},
		"no function":               {"orders": {}},
		"spaces in the function":    {"orders": {FunctionName: "my orders"}},
		"credible without a lookup": {"orders": {FunctionName: "orders", NotFoundCredible: true}},
	} {
		if _, err := lambda.New(lambda.Options{Functions: fns, Client: client}); class(err) != retrypolicy.PermanentConfig {
			t.Errorf("%s: New = %v, want misconfigured", name, err)
		}
	}
}
