package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/internal/emutest"
	"github.com/taskledger/taskledger/internal/destination/webhook"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestMain(m *testing.M) { emutest.Main(m) }

// receiver is a webhook receiver that verifies every request with the
// independent Standard Webhooks library, records deliveries by webhook-id
// and serves a readback at /deliveries/{id}.
type receiver struct {
	t   *testing.T
	srv *httptest.Server
	wh  *standardwebhooks.Webhook

	mu          sync.Mutex
	deliveries  map[string]int
	bodies      map[string][]byte
	requests    int
	badSigs     int
	script      map[string][]string
	lastHeaders http.Header
}

func newSecret(t *testing.T) string {
	t.Helper()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return webhook.SecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

func newReceiver(t *testing.T, secret string) *receiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, wh: wh, deliveries: map[string]int{}, bodies: map[string][]byte{}, script: map[string][]string{}}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// Script queues behaviours for an operation id: "ok" (default), "lose"
// (record, then drop the connection without replying), "hang" (record, then
// wait for the client to give up), or a status code answered without
// recording ("429", "503", ...).
func (r *receiver) Script(opID string, behaviours ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script[opID] = append(r.script[opID], behaviours...)
}

func (r *receiver) Deliveries(opID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliveries[opID]
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	r.requests++
	r.lastHeaders = req.Header.Clone()
	if err := r.wh.Verify(body, req.Header); err != nil {
		r.badSigs++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if req.Method == http.MethodGet {
		n := r.deliveries[strings.TrimPrefix(req.URL.Path, "/deliveries/")]
		r.mu.Unlock()
		if n == 0 {
			http.NotFound(w, req)
			return
		}
		_, _ = fmt.Fprintf(w, `{"id":"rcv-%s"}`, id)
		return
	}
	behaviour := "ok"
	if s := r.script[id]; len(s) > 0 {
		behaviour, r.script[id] = s[0], s[1:]
	}
	if behaviour == "ok" || behaviour == "lose" || behaviour == "hang" {
		r.deliveries[id]++
		r.bodies[id] = body
	}
	r.mu.Unlock()
	switch behaviour {
	case "ok":
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":"rcv-%s"}`, id)
	case "lose":
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			r.t.Errorf("hijack: %v", err)
			return
		}
		_ = conn.Close()
	case "hang":
		<-req.Context().Done()
	default:
		if behaviour == "429" {
			w.Header().Set("Retry-After", "7")
		}
		if behaviour == "301" || behaviour == "302" {
			w.Header().Set("Location", "https://elsewhere.example/")
		}
		var code int
		_, _ = fmt.Sscan(behaviour, &code)
		w.WriteHeader(code)
	}
}

// staticSecrets is a SecretSource holding fixed secrets.
type staticSecrets struct {
	mu          sync.Mutex
	secrets     map[string]string
	invalidated []string
}

func (s *staticSecrets) Secret(_ context.Context, id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.secrets[id]
	if !ok {
		return nil, retrypolicy.Misconfigured(fmt.Errorf("no secret %s", id))
	}
	return webhook.ParseSecret(v)
}

func (s *staticSecrets) Invalidate(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.invalidated = append(s.invalidated, id)
}

type bundle struct {
	rcv     *receiver
	hook    *webhook.Webhook
	secrets *staticSecrets
}

func setup(t *testing.T, mutate func(map[string]webhook.Endpoint)) bundle {
	t.Helper()
	secret := newSecret(t)
	rcv := newReceiver(t, secret)
	secrets := &staticSecrets{secrets: map[string]string{"arn:secret:crm": secret, "arn:secret:wrong": newSecret(t)}}
	eps := map[string]webhook.Endpoint{
		"crm":      {URL: rcv.srv.URL + "/hooks", SecretID: "arn:secret:crm", ReadbackURL: rcv.srv.URL + "/deliveries/{operation_id}", NotFoundCredible: true},
		"no-rb":    {URL: rcv.srv.URL + "/hooks", SecretID: "arn:secret:crm"},
		"wrongkey": {URL: rcv.srv.URL + "/hooks", SecretID: "arn:secret:wrong"},
	}
	if mutate != nil {
		mutate(eps)
	}
	h, err := webhook.New(webhook.Options{Endpoints: eps, Secrets: secrets, HTTPClient: rcv.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return bundle{rcv: rcv, hook: h, secrets: secrets}
}

// payload has insignificant whitespace: the receiver must get these exact
// bytes, whose hash the receipt names.
const payload = `{"summary": "customer private summary 0451",  "to":"crm"}`

func req(opID, ep string) destination.Request {
	return destination.Request{OperationID: opID, Attempt: 1, Destination: webhook.Name,
		Params: json.RawMessage(`{"endpoint":"` + ep + `"}`), Payload: json.RawMessage(payload), CorrelationID: "corr-1"}
}

func classOf(err error) retrypolicy.Classification { return retrypolicy.Classify(err) }

func TestDeliverIsSignedAndVerified(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	rc, err := b.hook.Deliver(context.Background(), req("task-1", "crm"))
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	u, _ := url.Parse(b.rcv.srv.URL)
	want := destination.Receipt{OperationID: "task-1", PayloadSHA256: destination.HashPayload(json.RawMessage(payload)),
		Destination: "webhook", DestinationIdentity: u.Host, ProviderRef: "rcv-task-1"}
	if rc != want {
		t.Fatalf("receipt %+v, want %+v", rc, want)
	}
	if n := b.rcv.Deliveries("task-1"); n != 1 || b.rcv.badSigs != 0 {
		t.Fatalf("receiver saw %d deliveries, %d bad signatures", n, b.rcv.badSigs)
	}
	h := b.rcv.lastHeaders
	if h.Get("Idempotency-Key") != "task-1" || h.Get("webhook-id") != "task-1" || !strings.HasPrefix(h.Get("webhook-signature"), "v1,") {
		t.Errorf("headers %v", h)
	}
	raw := b.rcv.bodies["task-1"]
	if !strings.HasSuffix(string(raw), `"payload":`+payload+`}}`) {
		t.Errorf("body does not carry the payload's exact bytes: %s", raw)
	}
	var body webhook.Body
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	if body.Type != webhook.EventType || body.Data.OperationID != "task-1" || body.Data.PayloadSHA256 != want.PayloadSHA256 ||
		string(body.Data.Payload) != payload || body.Data.CorrelationID != "corr-1" || body.Timestamp.IsZero() {
		t.Errorf("body %+v", body)
	}
}

func TestWrongSecretIsMisconfiguredAndInvalidates(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.hook.Deliver(context.Background(), req("task-1", "wrongkey"))
	if c := classOf(err); c.Class != retrypolicy.PermanentConfig {
		t.Fatalf("err %v class %v, want permanent_config", err, c.Class)
	}
	if b.rcv.badSigs != 1 || b.rcv.Deliveries("task-1") != 0 {
		t.Fatalf("receiver: %d bad signatures, %d deliveries", b.rcv.badSigs, b.rcv.Deliveries("task-1"))
	}
	if got := strings.Join(b.secrets.invalidated, ","); got != "arn:secret:wrong" {
		t.Errorf("invalidated %q", got)
	}
}

// TestLostReplyThenReadbackFindsOne is seed 000's lost-reply experiment:
// the receiver accepts and drops the connection before replying. The
// outcome is uncertain, the HTTP client does not replay the POST on its
// reused connection, and the readback finds exactly one delivery.
func TestLostReplyThenReadbackFindsOne(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	// Warm a keep-alive connection: Go's transport replays a request that
	// fails on a reused connection if it thinks the request replayable.
	if _, err := b.hook.Deliver(ctx, req("warm-up", "crm")); err != nil {
		t.Fatal(err)
	}
	b.rcv.Script("task-lost", "lose")
	_, err := b.hook.Deliver(ctx, req("task-lost", "crm"))
	if c := classOf(err); c.Class != retrypolicy.UnknownOutcome {
		t.Fatalf("lost reply: err %v class %v, want unknown_outcome", err, c.Class)
	}
	if n := b.rcv.Deliveries("task-lost"); n != 1 {
		t.Fatalf("receiver has %d deliveries of task-lost after a lost reply, want 1", n)
	}
	rc, dec, err := destination.Resolve(ctx, b.hook, req("task-lost", "crm"), false)
	if err != nil || dec.Action != destination.Complete {
		t.Fatalf("Resolve = %+v, %v", dec, err)
	}
	if rc.ReadbackResult != destination.ReadbackFound || rc.ReadbackAt.IsZero() || rc.ProviderRef != "rcv-task-lost" || rc.OperationID != "task-lost" {
		t.Errorf("readback receipt %+v", rc)
	}
	if n := b.rcv.Deliveries("task-lost"); n != 1 {
		t.Fatalf("receiver has %d deliveries after readback, want exactly 1", n)
	}
}

func TestLostReplyWithoutReadbackParks(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.rcv.Script("task-x", "lose")
	_, err := b.hook.Deliver(context.Background(), req("task-x", "no-rb"))
	if classOf(err).Class != retrypolicy.UnknownOutcome {
		t.Fatalf("err %v", err)
	}
	_, dec, err := destination.Resolve(context.Background(), b.hook, req("task-x", "no-rb"), false)
	if err != nil || dec.Action != destination.Park || dec.Reason != destination.ReasonUnknownOutcome {
		t.Fatalf("Resolve = %+v, %v", dec, err)
	}
	if n := b.rcv.Deliveries("task-x"); n != 1 {
		t.Fatalf("deliveries %d, want 1 (never re-sent)", n)
	}
}

func TestTimeoutAfterWriteIsUncertain(t *testing.T) {
	t.Parallel()
	b := setup(t, func(eps map[string]webhook.Endpoint) {
		ep := eps["crm"]
		ep.Timeout = 300 * time.Millisecond
		eps["crm"] = ep
	})
	b.rcv.Script("task-slow", "hang")
	_, err := b.hook.Deliver(context.Background(), req("task-slow", "crm"))
	if c := classOf(err); c.Class != retrypolicy.UnknownOutcome {
		t.Fatalf("err %v class %v, want unknown_outcome", err, c.Class)
	}
	if _, err := b.hook.Lookup(context.Background(), req("task-slow", "crm")); err != nil {
		t.Fatalf("readback after the timeout: %v", err)
	}
}

func TestResponseClasses(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	cases := []struct {
		behaviour  string
		class      retrypolicy.Class
		retryAfter time.Duration
	}{
		{"429", retrypolicy.Transient, 7 * time.Second},
		{"503", retrypolicy.Transient, 0},      // not handled: a refusal
		{"504", retrypolicy.UnknownOutcome, 0}, // a gateway gave up waiting
		{"524", retrypolicy.UnknownOutcome, 0},
		{"500", retrypolicy.UnknownOutcome, 0}, // a handler that failed after acting
		{"502", retrypolicy.UnknownOutcome, 0}, // a backend that died after acting
		{"507", retrypolicy.UnknownOutcome, 0}, // any 5xx but 503 may have acted
		{"408", retrypolicy.Transient, 0},
		{"400", retrypolicy.PermanentInput, 0},
		{"422", retrypolicy.PermanentInput, 0},
		{"404", retrypolicy.PermanentConfig, 0},
		{"410", retrypolicy.PermanentConfig, 0},
		{"403", retrypolicy.PermanentConfig, 0},
		{"301", retrypolicy.PermanentConfig, 0},
		{"302", retrypolicy.UnknownOutcome, 0}, // a processed POST's answer
		{"303", retrypolicy.UnknownOutcome, 0},
		{"409", retrypolicy.UnknownOutcome, 0}, // the same Idempotency-Key in progress
	}
	for _, tc := range cases {
		op := "task-" + tc.behaviour
		b.rcv.Script(op, tc.behaviour)
		_, err := b.hook.Deliver(context.Background(), req(op, "crm"))
		c := classOf(err)
		if c.Class != tc.class || c.RetryAfter != tc.retryAfter {
			t.Errorf("%s: err %v class %v retry-after %v, want %v %v", tc.behaviour, err, c.Class, c.RetryAfter, tc.class, tc.retryAfter)
		}
		if err != nil && strings.Contains(err.Error(), "0451") {
			t.Errorf("%s: error quotes the payload: %v", tc.behaviour, err)
		}
		if n := b.rcv.Deliveries(op); n != 0 {
			t.Errorf("%s: recorded %d deliveries", tc.behaviour, n)
		}
	}
}

func TestConnectionRefusedIsNotSent(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	h, err := webhook.New(webhook.Options{
		Endpoints: map[string]webhook.Endpoint{"gone": {URL: "https://" + addr + "/hooks", SecretID: "s"}},
		Secrets:   &staticSecrets{secrets: map[string]string{"s": newSecret(t)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Deliver(context.Background(), req("task-1", "gone"))
	if c := classOf(err); c.Class != retrypolicy.Transient || !errors.Is(err, retrypolicy.ErrRequestNotSent) {
		t.Fatalf("err %v class %v, want transient, not sent", err, c.Class)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	if _, err := b.hook.Lookup(ctx, req("never", "crm")); !errors.Is(err, destination.ErrNotFound) {
		t.Fatalf("Lookup of an absent delivery: %v", err)
	}
	_, dec, err := destination.Resolve(ctx, b.hook, req("never", "crm"), false)
	if err != nil || dec.Action != destination.Requeue {
		t.Fatalf("credible not found: %+v %v", dec, err)
	}
	if _, err := b.hook.Lookup(ctx, req("never", "no-rb")); !errors.Is(err, destination.ErrNoReadback) {
		t.Fatalf("Lookup without a readback URL: %v", err)
	}
	if b.rcv.badSigs != 0 {
		t.Fatalf("readback GETs failed verification %d times", b.rcv.badSigs)
	}
}

func TestParamsAndGuarantees(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	g, err := b.hook.GuaranteesFor(json.RawMessage(`{"endpoint":"crm"}`))
	if err != nil || g != (destination.Guarantees{Readback: destination.ReadbackByOperationID, NotFoundCredible: true}) {
		t.Fatalf("crm guarantees %+v, %v", g, err)
	}
	g, err = b.hook.GuaranteesFor(json.RawMessage(`{"endpoint":"no-rb"}`))
	if err != nil || g != (destination.Guarantees{Readback: destination.ReadbackNone}) {
		t.Fatalf("no-rb guarantees %+v, %v", g, err)
	}
	if b.hook.Guarantees() != (destination.Guarantees{}) {
		t.Fatalf("general guarantees promise something: %+v", b.hook.Guarantees())
	}
	for _, params := range []string{`{}`, `{"endpoint":"nope"}`, `{"endpoint":"crm","url":"https://evil.example/"}`, `{"endpoint":3}`, `[]`} {
		r := req("task-p", "crm")
		r.Params = json.RawMessage(params)
		_, err := b.hook.Deliver(context.Background(), r)
		var pe *destination.ParamsError
		if !errors.As(err, &pe) || classOf(err).Class != retrypolicy.PermanentInput {
			t.Errorf("params %s: err %v, want a permanent *ParamsError", params, err)
		}
	}
	if b.rcv.requests != 0 {
		t.Fatalf("bad params reached the receiver %d times", b.rcv.requests)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	secrets := &staticSecrets{}
	for name, ep := range map[string]webhook.Endpoint{
		"http":            {URL: "http://example.com/h", SecretID: "s"},
		"no host":         {URL: "https:///h", SecretID: "s"},
		"user info":       {URL: "https://u:p@example.com/h", SecretID: "s"},
		"no secret":       {URL: "https://example.com/h"},
		"readback no id":  {URL: "https://example.com/h", SecretID: "s", ReadbackURL: "https://example.com/d"},
		"readback http":   {URL: "https://example.com/h", SecretID: "s", ReadbackURL: "http://example.com/d/{operation_id}"},
		"negative timout": {URL: "https://example.com/h", SecretID: "s", Timeout: -1},
	} {
		_, err := webhook.New(webhook.Options{Endpoints: map[string]webhook.Endpoint{"e": ep}, Secrets: secrets})
		if classOf(err).Class != retrypolicy.PermanentConfig {
			t.Errorf("%s: New = %v, want misconfigured", name, err)
		}
	}
	ok := webhook.Endpoint{URL: "https://example.com/h", SecretID: "s"}
	if _, err := webhook.New(webhook.Options{Endpoints: map[string]webhook.Endpoint{"Bad Name": ok}, Secrets: secrets}); err == nil {
		t.Error("accepted an invalid endpoint name")
	}
	if _, err := webhook.New(webhook.Options{Endpoints: map[string]webhook.Endpoint{"e": ok}}); err == nil {
		t.Error("accepted no secret source")
	}
	if _, err := webhook.New(webhook.Options{Secrets: secrets}); err == nil {
		t.Error("accepted no endpoints")
	}
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	if _, err := webhook.ParseSecret(newSecret(t)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!!notbase64", "whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))} {
		_, err := webhook.ParseSecret(s)
		if err == nil {
			t.Errorf("accepted %q", s)
			continue
		}
		if len(s) > 8 && strings.Contains(err.Error(), s[6:]) {
			t.Errorf("error quotes the secret: %v", err)
		}
	}
}

func TestSignMatchesIndependentLibrary(t *testing.T) {
	t.Parallel()
	secret := newSecret(t)
	key, _ := webhook.ParseSecret(secret)
	wh, _ := standardwebhooks.NewWebhook(secret)
	ts := time.Unix(1_700_000_000, 0)
	want, err := wh.Sign("msg_1", ts, []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := webhook.Sign(key, "msg_1", ts, []byte(`{"a":1}`)); got != want {
		t.Fatalf("Sign = %s, library signs %s", got, want)
	}
}
