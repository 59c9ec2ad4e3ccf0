package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestOpenAPIDocument checks the document itself: valid OpenAPI 3, the four
// routes, the published limits and retention.
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	s := spec(t)
	for path, method := range map[string]string{"/tasks": "POST", "/tasks/{id}": "GET", "/tasks/{id}/regenerate": "POST", "/tasks/{id}/cancel": "POST"} {
		item := s.doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil || item.GetOperation(http.MethodOptions) == nil {
			t.Errorf("document lacks %s %s (or its OPTIONS)", method, path)
		}
	}
	desc := s.doc.Info.Description
	for _, want := range []string{"65536 bytes", "32768 bytes", "7 days", "Idempotency-Key"} {
		if !strings.Contains(desc, want) {
			t.Errorf("info.description does not publish %q", want)
		}
	}
	if ledger.DefaultRetention.Hours() != 7*24 || api.MaxBody != 65536 || api.MaxInput != 32768 {
		t.Errorf("published limits drifted from the code: retention %v, body %d, input %d", ledger.DefaultRetention, api.MaxBody, api.MaxInput)
	}
	key := s.doc.Components.Parameters["IdempotencyKey"].Value.Schema.Value
	if key.MinLength != 1 || key.MaxLength == nil || *key.MaxLength != api.MaxIdempotencyKey {
		t.Errorf("Idempotency-Key schema %d..%v", key.MinLength, key.MaxLength)
	}
}

// TestConformanceCatchesDrift proves the conformance check can fail: a
// response that strays from the document is reported.
func TestConformanceCatchesDrift(t *testing.T) {
	t.Parallel()
	id := ledger.TaskID(api.Anonymous, "k")
	view := `{"task_id":"` + id + `","state":"queued","kind":"generate","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","attempts":0,"max_attempts":5,"correlation_id":"` + id + `","receipt":{"operation_id":"` + id + `","payload_sha256":"` + strings.Repeat("a", 64) + `"}}`
	jsonHdr := func(extra ...string) map[string]string {
		h := map[string]string{"Content-Type": "application/json", "X-Correlation-Id": id}
		for i := 0; i+1 < len(extra); i += 2 {
			h[extra[i]] = extra[i+1]
		}
		return h
	}
	submit := submitReq("k", body("x"))
	good := events.APIGatewayV2HTTPResponse{StatusCode: 202, Headers: jsonHdr("Location", "/tasks/"+id), Body: view}
	if err := conformance(t, submit, good); err != nil {
		t.Fatalf("a conforming response was rejected: %v", err)
	}
	bad := map[string]events.APIGatewayV2HTTPResponse{
		"202 without Location":      {StatusCode: 202, Headers: jsonHdr(), Body: view},
		"200 without replay flag":   {StatusCode: 200, Headers: jsonHdr("Location", "/tasks/"+id), Body: view},
		"undocumented status":       {StatusCode: 201, Headers: jsonHdr("Location", "/tasks/"+id), Body: view},
		"unknown view field":        {StatusCode: 202, Headers: jsonHdr("Location", "/tasks/"+id), Body: strings.Replace(view, `"attempts"`, `"scope":"anonymous","attempts"`, 1)},
		"bad state":                 {StatusCode: 202, Headers: jsonHdr("Location", "/tasks/"+id), Body: strings.Replace(view, "queued", "pending", 1)},
		"problem as plain json":     {StatusCode: 400, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"type":"x","title":"t","status":400}`},
		"problem with foreign type": {StatusCode: 400, Headers: map[string]string{"Content-Type": "application/problem+json"}, Body: `{"type":"about:blank","title":"t","status":400}`},
		"503 without Retry-After":   {StatusCode: 503, Headers: map[string]string{"Content-Type": "application/problem+json"}, Body: `{"type":"https://taskledger.dev/problems/throttled","title":"t","status":503}`},
	}
	for name, resp := range bad {
		if err := conformance(t, submit, resp); err == nil {
			t.Errorf("%s: accepted by the conformance check", name)
		}
	}
}
