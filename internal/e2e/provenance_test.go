package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/eventbridge"
	"github.com/taskledger/taskledger/internal/destination/webhook"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// asCaller calls the stack's submit handler as a JWT authorizer would
// pass the request on: sub, and cognito:groups when groups is set.
func (s *deliverStack) asCaller(t *testing.T, sub, groups, method, path, key, body string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	h := map[string]string{}
	if body != "" {
		h["content-type"] = "application/json"
	}
	if key != "" {
		h["idempotency-key"] = key
	}
	claims := map[string]string{"sub": sub, "iss": "https://issuer.example.com"}
	if groups != "" {
		claims["cognito:groups"] = groups
	}
	resp, err := s.submit.Handle(context.Background(), events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path, Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// provReceiver is a webhook receiver (TLS, on 127.0.0.1) that verifies
// each delivery with the independent Standard Webhooks library and keeps
// the verified bodies by webhook-id.
type provReceiver struct {
	srv *httptest.Server
	wh  *standardwebhooks.Webhook

	mu      sync.Mutex
	bodies  map[string][]byte
	badSigs int
}

func newProvReceiver(t *testing.T, secret string) *provReceiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &provReceiver{wh: wh, bodies: map[string][]byte{}}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		body, _ := io.ReadAll(q.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.wh.Verify(body, q.Header); err != nil {
			r.badSigs++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		r.bodies[q.Header.Get("webhook-id")] = body
		_, _ = fmt.Fprintf(w, `{"id":"rcv-%s"}`, q.Header.Get("webhook-id"))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// provenance returns the provenance of the verified delivery id, as the
// receiver read it from the signed body.
func (r *provReceiver) provenance(t *testing.T, id string) destination.Provenance {
	t.Helper()
	r.mu.Lock()
	body, ok, bad := r.bodies[id], r.bodies[id] != nil, r.badSigs
	r.mu.Unlock()
	if !ok || bad != 0 {
		t.Fatalf("receiver: delivery %s verified %t, bad signatures %d", id, ok, bad)
	}
	var b struct {
		Data struct {
			PayloadSHA256 string                  `json:"payload_sha256"`
			Provenance    *destination.Provenance `json:"provenance"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.Data.Provenance == nil {
		t.Fatalf("delivery %s: body without provenance (%v): %s", id, err, body)
	}
	if b.Data.Provenance.Type == destination.ProvenanceApproval && b.Data.PayloadSHA256 != b.Data.Provenance.ArtifactSHA256 {
		t.Fatalf("delivery %s: payload_sha256 %s is not the approved artifact %s", id, b.Data.PayloadSHA256, b.Data.Provenance.ArtifactSHA256)
	}
	return *b.Data.Provenance
}

// newSecretString is a random "whsec_..." signing secret.
func newSecretString(t *testing.T) string {
	t.Helper()
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	return webhook.SecretPrefix + base64.StdEncoding.EncodeToString(raw[:])
}

// fixedSecret is a webhook.SecretSource with one secret.
type fixedSecret []byte

func (s fixedSecret) Secret(context.Context, string) ([]byte, error) { return s, nil }

// A webhook receiver tells an approved delivery from a direct one by what
// is signed: the delivery an approval made carries {"type":"approval"}
// with the gated task, the approved artifact's hash, the approver and the
// round; a direct deliver submit carries {"type":"direct"} with its
// caller. Neither comes from the request body. And with an approver claim,
// a caller who may not approve cannot send the artifact directly either.
func TestWebhookReceiverTellsApprovedFromDirect(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		s := newDeliverStack(t, e)
		secret := newSecretString(t)
		rcv := newProvReceiver(t, secret)
		key, err := webhook.ParseSecret(secret)
		if err != nil {
			t.Fatal(err)
		}
		hook, err := webhook.New(webhook.Options{
			Endpoints:  map[string]webhook.Endpoint{"crm": {URL: rcv.srv.URL + "/hooks", SecretID: "crm-secret"}},
			Secrets:    fixedSecret(key),
			HTTPClient: rcv.srv.Client(),
			Now:        s.clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.use(t, hook)
		s.submit.Auth = api.AuthConfig{Mode: api.AuthJWT}
		s.submit.Approvals = api.ApprovalPolicy{Claim: "cognito:groups", Value: "approvers", NoSelfApproval: true}
		const approvers = "[staff approvers]"

		// Alice's gated task, approved by Carol.
		resp := s.asCaller(t, "alice", "", http.MethodPost, "/tasks", "wf-prov", `{"kind":"generate","input":{"prompt":"summarise"},
			"approval":{"required":true},"deliver":[{"destination":"webhook","params":{"endpoint":"crm"}}]}`)
		var gated api.TaskView
		if resp.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(resp.Body), &gated) != nil {
			t.Fatalf("submit gated = %d %s", resp.StatusCode, resp.Body)
		}
		s.work(t)
		resp = s.asCaller(t, "carol", approvers, http.MethodGet, "/tasks/"+gated.TaskID, "", "")
		if json.Unmarshal([]byte(resp.Body), &gated) != nil || gated.State != string(ledger.StateAwaitingApproval) {
			t.Fatalf("gated task after the worker: %s", resp.Body)
		}
		resp = s.asCaller(t, "carol", approvers, http.MethodPost, "/tasks/"+gated.TaskID+"/approve", "", `{"artifact_sha256":"`+gated.ResultSHA256+`"}`)
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &gated) != nil || len(gated.Deliveries) != 1 {
			t.Fatalf("approve = %d %s", resp.StatusCode, resp.Body)
		}
		approved := gated.Deliveries[0].TaskID
		s.work(t)
		want := destination.Provenance{Type: destination.ProvenanceApproval, TaskID: gated.TaskID, ArtifactSHA256: gated.ResultSHA256, DecidedBy: "jwt:carol", Round: 0}
		if got := rcv.provenance(t, approved); got != want {
			t.Fatalf("approved delivery: receiver saw provenance %+v, want %+v", got, want)
		}

		// Bob may not approve, so he may not deliver the artifact directly.
		artifact := `{"destination":"webhook","params":{"endpoint":"crm"},"payload":` + string(gated.Result) + `}`
		resp = s.asCaller(t, "bob", "", http.MethodPost, "/tasks", "direct-bob", `{"kind":"deliver","input":`+artifact+`}`)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Body, api.TypeDirectDeliverForbidden) {
			t.Fatalf("bob's direct deliver = %d %s; want 403 direct-deliver-forbidden", resp.StatusCode, resp.Body)
		}
		if _, err := s.l.Get(context.Background(), s.l.TaskID("jwt:bob", "direct-bob")); err == nil {
			t.Fatal("the refused direct deliver wrote a task")
		}
		// Carol may; her receiver is told it is direct, and by whom.
		resp = s.asCaller(t, "carol", approvers, http.MethodPost, "/tasks", "direct-carol", `{"kind":"deliver","input":`+artifact+`}`)
		var direct api.TaskView
		if resp.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(resp.Body), &direct) != nil {
			t.Fatalf("carol's direct deliver = %d %s", resp.StatusCode, resp.Body)
		}
		s.work(t)
		if got := rcv.provenance(t, direct.TaskID); got != (destination.Provenance{Type: destination.ProvenanceDirect, Caller: "jwt:carol"}) {
			t.Fatalf("direct delivery: receiver saw provenance %+v", got)
		}
		// Each task's view shows what its receiver was told.
		resp = s.asCaller(t, "alice", "", http.MethodGet, "/tasks/"+approved, "", "")
		var dv api.TaskView
		if json.Unmarshal([]byte(resp.Body), &dv) != nil || dv.Provenance == nil || *dv.Provenance != want || dv.State != string(ledger.StateCompleted) {
			t.Fatalf("approved delivery's view: %s", resp.Body)
		}
	})
}

// recordingEB passes PutEvents on to the emulator and keeps the entries
// sent.
type recordingEB struct {
	eventbridge.API
	mu      sync.Mutex
	entries []ebtypes.PutEventsRequestEntry
}

func (r *recordingEB) PutEvents(ctx context.Context, in *awseb.PutEventsInput, opts ...func(*awseb.Options)) (*awseb.PutEventsOutput, error) {
	r.mu.Lock()
	r.entries = append(r.entries, in.Entries...)
	r.mu.Unlock()
	return r.API.PutEvents(ctx, in, opts...)
}

func (r *recordingEB) sent() []ebtypes.PutEventsRequestEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ebtypes.PutEventsRequestEntry(nil), r.entries...)
}

// An EventBridge delivery's detail-type is the one configured, however
// the params try to name another: the submit refuses a detail_type param
// (400, the field named, nothing written), a deliver task recorded with
// one before that refusal is failed by the worker without a PutEvents, and
// the event that is put carries the configured detail-type with the
// delivery's provenance in its detail.
func TestEventBridgeDetailTypeIsTheConfiguredOne(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		eb := awseb.NewFromConfig(e.AWS)
		bus, err := eb.CreateEventBus(ctx, &awseb.CreateEventBusInput{Name: aws.String(testenv.UniquePrefix() + "-bus")})
		if err != nil {
			t.Fatalf("CreateEventBus: %v", err)
		}
		busARN := aws.ToString(bus.EventBusArn)
		t.Cleanup(func() {
			_, _ = eb.DeleteEventBus(context.Background(), &awseb.DeleteEventBusInput{Name: aws.String(busARN[strings.LastIndex(busARN, "/")+1:])})
		})
		s := newDeliverStack(t, e)
		rec := &recordingEB{API: eb}
		reg, err := deliver.Build(deliver.Config{EventBridge: &deliver.EventBridgeConfig{BusARN: busARN, DetailType: "order.follow_up"}}, deliver.Deps{EventBridge: rec, Now: s.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		s.reg = reg
		s.submit.Destinations, s.w.Destinations, s.rec.Destinations = reg, reg, reg
		s.submit.Auth = api.AuthConfig{Mode: api.AuthJWT}
		s.submit.DirectDeliver = api.DirectDeliverAnyone

		resp := s.asCaller(t, "bob", "", http.MethodPost, "/tasks", "eb-named", `{"kind":"deliver","input":{"destination":"eventbridge","params":{"detail_type":"order.approved"},"payload":{"order":"order-4711"}}}`)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, `"field":"input.params.detail_type"`) {
			t.Fatalf("detail_type param = %d %s; want 400 on input.params.detail_type", resp.StatusCode, resp.Body)
		}
		if _, err := s.l.Get(ctx, s.l.TaskID("jwt:bob", "eb-named")); err == nil {
			t.Fatal("the refused submit wrote a task")
		}

		// Recorded before submits refused the param (as an upgrade finds
		// it): never sent under the detail-type it names.
		legacy, err := s.l.Create(ctx, ledger.NewTask{Scope: "jwt:bob", IdempotencyKey: "eb-legacy", Kind: ledger.KindDeliver, PayloadSHA256: "legacy",
			Input: `{"destination":"eventbridge","params":{"detail_type":"order.approved"},"payload":{"order":"order-4712"}}`})
		if err != nil {
			t.Fatal(err)
		}
		if err := (&dispatch.Sender{SQS: e.SQS, QueueURL: e.Names.TaskQueueURL}).Send(ctx, legacy.TaskID, legacy.TaskID, 0); err != nil {
			t.Fatal(err)
		}
		s.work(t)
		if got := s.task(t, legacy.TaskID); got.State != ledger.StateFailed || len(rec.sent()) != 0 {
			t.Fatalf("legacy task with a detail_type: %s, %d PutEvents entries; want failed and none", got.State, len(rec.sent()))
		}

		id := s.submitDeliverAs(t, "bob", "eb-ok", `{"destination":"eventbridge","payload":{"order":"order-4713"}}`)
		s.work(t)
		if got := s.task(t, id); got.State != ledger.StateCompleted {
			t.Fatalf("eventbridge delivery: %s %s", got.State, got.ErrorMessage)
		}
		sent := rec.sent()
		if len(sent) != 1 || aws.ToString(sent[0].DetailType) != "order.follow_up" {
			t.Fatalf("PutEvents entries %+v; want one with detail-type order.follow_up", sent)
		}
		var d eventbridge.Detail
		if err := json.Unmarshal([]byte(aws.ToString(sent[0].Detail)), &d); err != nil || d.OperationID != id ||
			d.Provenance == nil || *d.Provenance != (destination.Provenance{Type: destination.ProvenanceDirect, Caller: "jwt:bob"}) {
			t.Fatalf("event detail %s (%v): want operation %s, provenance direct by jwt:bob", aws.ToString(sent[0].Detail), err, id)
		}
	})
}

// submitDeliverAs submits a deliver task as the JWT caller sub and returns
// its id.
func (s *deliverStack) submitDeliverAs(t *testing.T, sub, key, input string) string {
	t.Helper()
	resp := s.asCaller(t, sub, "", http.MethodPost, "/tasks", key, `{"kind":"deliver","input":`+input+`}`)
	var v api.TaskView
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(resp.Body), &v) != nil {
		t.Fatalf("submit deliver as %s = %d %s", sub, resp.StatusCode, resp.Body)
	}
	return v.TaskID
}
