package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type bundle struct {
	env     *testenv.Env
	l       *ledger.Ledger
	h       *api.Handler
	logs    *testenv.Buffer
	metrics *testenv.Buffer
}

type option struct {
	now     func() time.Time // the ledger's clock (nil: time.Now)
	ddb     ledger.DynamoDB
	sqs     dispatch.SQS
	handler func(*api.Handler)
}

func withDynamoDB(d func(ledger.DynamoDB) ledger.DynamoDB) func(*option) {
	return func(o *option) { o.ddb = d(o.ddb) }
}

// withLedgerClock gives the ledger a clock.
func withLedgerClock(now func() time.Time) func(*option) {
	return func(o *option) { o.now = now }
}

func withSQS(s func(dispatch.SQS) dispatch.SQS) func(*option) {
	return func(o *option) { o.sqs = s(o.sqs) }
}

func withHandler(f func(*api.Handler)) func(*option) {
	return func(o *option) { o.handler = f }
}

func setup(t *testing.T, e *testenv.Env, opts ...func(*option)) *bundle {
	t.Helper()
	o := &option{ddb: e.DDB, sqs: e.SQS}
	for _, f := range opts {
		f(o)
	}
	l, err := ledger.New(o.ddb, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, WatchTable: e.Names.WatchTable, Now: o.now})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{env: e, l: l, logs: &testenv.Buffer{}, metrics: &testenv.Buffer{}}
	b.h = &api.Handler{
		Ledger:         l,
		Dispatch:       &dispatch.Sender{SQS: o.sqs, QueueURL: e.Names.TaskQueueURL},
		Log:            logging.New(b.logs, "debug"),
		Metrics:        metrics.NewWriter(b.metrics),
		AllowedOrigins: []string{"http://localhost:8080", "https://app.example.com"},
	}
	if o.handler != nil {
		o.handler(b.h)
	}
	return b
}

// do runs req through the handler and checks the response against the
// OpenAPI document.
func (b *bundle) do(t *testing.T, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := b.h.Handle(context.Background(), req)
	if err != nil {
		t.Fatalf("Handle returned an error: %v", err)
	}
	conform(t, req, resp)
	return resp
}

// ---- requests as API Gateway sends them ----

type reqOpt func(*events.APIGatewayV2HTTPRequest)

func header(k, v string) reqOpt {
	return func(r *events.APIGatewayV2HTTPRequest) { r.Headers[strings.ToLower(k)] = v }
}

func noHeader(k string) reqOpt {
	return func(r *events.APIGatewayV2HTTPRequest) { delete(r.Headers, strings.ToLower(k)) }
}

// asJWT makes the request come through a JWT authorizer with this sub.
func asJWT(sub string) reqOpt {
	return func(r *events.APIGatewayV2HTTPRequest) {
		claims := map[string]string{"iss": "https://issuer.example.com", "token_use": "access"}
		if sub != "" {
			claims["sub"] = sub
		}
		r.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims},
		}
	}
}

func asIAM(arn, callerID string) reqOpt {
	return func(r *events.APIGatewayV2HTTPRequest) {
		r.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: arn, CallerID: callerID, AccountID: "123456789012"},
		}
	}
}

func newReq(method, routeTpl, path, id, body string, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	r := events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: method + " " + routeTpl,
		RawPath:  path,
		Headers:  map[string]string{"host": "api.example.com", "user-agent": "api-test"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:  method + " " + routeTpl,
			AccountID: "123456789012",
			Stage:     "$default",
			RequestID: "req-1",
			APIID:     "api",
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
		},
		Body: body,
	}
	if id != "" {
		r.PathParameters = map[string]string{"id": id}
	}
	if body != "" {
		r.Headers["content-type"] = "application/json"
	}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func submitReq(key, body string, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	if key != "" {
		opts = append([]reqOpt{header("Idempotency-Key", key)}, opts...)
	}
	return newReq(http.MethodPost, "/tasks", "/tasks", "", body, opts...)
}

func getReq(id string, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	return newReq(http.MethodGet, "/tasks/{id}", "/tasks/"+id, id, "", opts...)
}

func cancelReq(id string, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	return newReq(http.MethodPost, "/tasks/{id}/cancel", "/tasks/"+id+"/cancel", id, "", opts...)
}

func regenReq(id, key, body string, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	if key != "" {
		opts = append([]reqOpt{header("Idempotency-Key", key)}, opts...)
	}
	return newReq(http.MethodPost, "/tasks/{id}/regenerate", "/tasks/"+id+"/regenerate", id, body, opts...)
}

func body(prompt string) string {
	b, _ := json.Marshal(map[string]any{"kind": "generate", "input": map[string]any{"prompt": prompt}})
	return string(b)
}

// ---- response helpers ----

func view(t *testing.T, resp events.APIGatewayV2HTTPResponse) api.TaskView {
	t.Helper()
	var v api.TaskView
	if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
		t.Fatalf("task view %q: %v", resp.Body, err)
	}
	return v
}

func problem(t *testing.T, resp events.APIGatewayV2HTTPResponse) api.Problem {
	t.Helper()
	if ct := resp.Headers["Content-Type"]; ct != "application/problem+json" {
		t.Fatalf("status %d Content-Type = %q, want application/problem+json (body %s)", resp.StatusCode, ct, resp.Body)
	}
	var p api.Problem
	if err := json.Unmarshal([]byte(resp.Body), &p); err != nil {
		t.Fatalf("problem %q: %v", resp.Body, err)
	}
	if p.Status != resp.StatusCode {
		t.Fatalf("problem status %d, response status %d", p.Status, resp.StatusCode)
	}
	return p
}

func wantStatus(t *testing.T, resp events.APIGatewayV2HTTPResponse, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; headers %v body %s", resp.StatusCode, status, resp.Headers, resp.Body)
	}
}

func wantProblem(t *testing.T, resp events.APIGatewayV2HTTPResponse, status int, typ string) api.Problem {
	t.Helper()
	wantStatus(t, resp, status)
	p := problem(t, resp)
	if p.Type != typ {
		t.Fatalf("problem type = %q, want %q (%s)", p.Type, typ, resp.Body)
	}
	return p
}

// ---- table and queue inspection ----

func scanTasks(t *testing.T, e *testenv.Env) []ledger.Task {
	t.Helper()
	var out []ledger.Task
	var start map[string]ddbtypes.AttributeValue
	for {
		res, err := e.DDB.Scan(context.Background(), &dynamodb.ScanInput{TableName: &e.Names.TasksTable, ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		var page []ledger.Task
		if err := attributevalue.UnmarshalListOfMaps(res.Items, &page); err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(res.LastEvaluatedKey) == 0 {
			return out
		}
		start = res.LastEvaluatedKey
	}
}

// drainQueue receives every message on the task queue until two empty polls
// in a row, returning task id -> count (and correlation ids).
func drainQueue(t *testing.T, e *testenv.Env) (counts map[string]int, correlation map[string]string) {
	t.Helper()
	counts, correlation = map[string]int{}, map[string]string{}
	empty := 0
	deadline := time.Now().Add(30 * time.Second)
	for empty < 2 && time.Now().Before(deadline) {
		out, err := e.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &e.Names.TaskQueueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}, VisibilityTimeout: 300,
		})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range out.Messages {
			msg, err := dispatch.Parse(aws.ToString(m.Body))
			if err != nil {
				t.Fatalf("message %q: %v", aws.ToString(m.Body), err)
			}
			counts[msg.TaskID]++
			if a, ok := m.MessageAttributes[dispatch.CorrelationAttribute]; ok {
				correlation[msg.TaskID] = aws.ToString(a.StringValue)
			}
		}
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(string(rune('a' + i))), ReceiptHandle: m.ReceiptHandle}
		}
		if _, err := e.SQS.DeleteMessageBatch(context.Background(), &sqs.DeleteMessageBatchInput{QueueUrl: &e.Names.TaskQueueURL, Entries: entries}); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	return counts, correlation
}

// ---- OpenAPI conformance ----

type specT struct {
	doc    *openapi3.T
	router routers.Router
}

var loadSpec = sync.OnceValues(func() (*specT, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../../api/openapi.yaml")
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, err
	}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &specT{doc: doc, router: r}, nil
})

func spec(t *testing.T) *specT {
	t.Helper()
	s, err := loadSpec()
	if err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	return s
}

// httpRequest rebuilds the HTTP request API Gateway received.
func httpRequest(req events.APIGatewayV2HTTPRequest) *http.Request {
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		body, _ = base64.StdEncoding.DecodeString(req.Body)
	}
	target := "http://api.example.com" + req.RawPath
	if req.RawQueryString != "" {
		target += "?" + req.RawQueryString
	}
	hr := httptest.NewRequest(req.RequestContext.HTTP.Method, target, bytes.NewReader(body))
	for k, v := range req.Headers {
		hr.Header.Set(k, v)
	}
	return hr
}

// conform validates resp against the OpenAPI document (see conformance).
func conform(t *testing.T, req events.APIGatewayV2HTTPRequest, resp events.APIGatewayV2HTTPResponse) {
	t.Helper()
	if err := conformance(t, req, resp); err != nil {
		t.Errorf("%v\nheaders %v\nbody %s", err, resp.Headers, resp.Body)
	}
}

// conformance checks resp against the OpenAPI document: its status must be
// documented for the operation, and its headers and body must match. For a
// 2xx answer the request must also be valid per the document (what the
// handler accepts, the document accepts). Paths outside the document must
// be 404 or 405 problem+json.
func conformance(t *testing.T, req events.APIGatewayV2HTTPRequest, resp events.APIGatewayV2HTTPResponse) error {
	t.Helper()
	s := spec(t)
	hr := httpRequest(req)
	route, params, err := s.router.FindRoute(hr)
	if err != nil {
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			return fmt.Errorf("%s %s is not in the API document (%v) but answered %d", hr.Method, req.RawPath, err, resp.StatusCode)
		}
		if resp.Headers["Content-Type"] != "application/problem+json" {
			return fmt.Errorf("%s %s: %d without problem+json", hr.Method, req.RawPath, resp.StatusCode)
		}
		return nil
	}
	ctx := context.Background()
	in := &openapi3filter.RequestValidationInput{Request: hr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			return fmt.Errorf("%s %s answered %d, but the API document rejects the request: %w", hr.Method, req.RawPath, resp.StatusCode, err)
		}
	}
	hdr := http.Header{}
	for k, v := range resp.Headers {
		hdr.Set(k, v)
	}
	err = openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 hdr,
		Body:                   io.NopCloser(strings.NewReader(resp.Body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	if err != nil {
		return fmt.Errorf("%s %s -> %d does not match the API document: %w", hr.Method, req.RawPath, resp.StatusCode, err)
	}
	return nil
}

// eventsReq is the API Gateway request type, shortened for test tables.
type eventsReq = events.APIGatewayV2HTTPRequest
