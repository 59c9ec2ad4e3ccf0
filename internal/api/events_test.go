package api_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

var apigwEvents = []string{
	"apigw-submit-new.json",
	"apigw-submit-replay.json",
	"apigw-submit-mismatch.json",
	"apigw-get-task.json",
	"apigw-regenerate.json",
	"apigw-cancel.json",
}

func loadEvent(t *testing.T, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev
}

// subset reports whether every member of want is in got with the same value.
func subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !subset(v, g[k]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, got)
	}
}

// TestEventsRoundTrip: every sample decodes into the aws-lambda-go type and
// encodes back without losing anything it held.
func TestEventsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range apigwEvents {
		raw, err := os.ReadFile(filepath.Join("..", "..", "events", name))
		if err != nil {
			t.Fatal(err)
		}
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var orig, back any
		_ = json.Unmarshal(raw, &orig)
		_ = json.Unmarshal(again, &back)
		if !subset(orig, back) {
			t.Errorf("%s does not survive a round trip through events.APIGatewayV2HTTPRequest:\n%s", name, again)
		}
		if ev.Version != "2.0" || ev.RouteKey == "" || ev.RouteKey != ev.RequestContext.RouteKey || ev.RequestContext.HTTP.Method == "" ||
			ev.RawPath != ev.RequestContext.HTTP.Path || ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.JWT == nil {
			t.Errorf("%s is not a complete HTTP API v2 event with a JWT authorizer: %+v", name, ev)
		}
	}
}

// TestEventsSequence runs the samples through the handler in the order a
// client would send them.
func TestEventsSequence(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		newEv := loadEvent(t, "apigw-submit-new.json")
		scope, err := api.CallerScope(newEv.RequestContext)
		if err != nil {
			t.Fatal(err)
		}
		id := ledger.TaskID(scope, newEv.Headers["idempotency-key"])

		resp := b.do(t, newEv)
		wantStatus(t, resp, http.StatusAccepted)
		if view(t, resp).TaskID != id || resp.Headers["Location"] != "/tasks/"+id {
			t.Fatalf("new: %v %s", resp.Headers, resp.Body)
		}
		if resp.Headers["Access-Control-Allow-Origin"] != "http://localhost:8080" {
			t.Fatalf("the sample's browser origin got no CORS grant: %v", resp.Headers)
		}

		resp = b.do(t, loadEvent(t, "apigw-submit-replay.json"))
		wantStatus(t, resp, http.StatusOK)
		if resp.Headers[api.HeaderIdempotentReplayed] != "true" || view(t, resp).TaskID != id {
			t.Fatalf("replay: %v %s", resp.Headers, resp.Body)
		}

		wantProblem(t, b.do(t, loadEvent(t, "apigw-submit-mismatch.json")), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)

		getEv := loadEvent(t, "apigw-get-task.json")
		if getEv.PathParameters["id"] != id {
			t.Fatalf("apigw-get-task.json names %s, but the submit sample creates %s", getEv.PathParameters["id"], id)
		}
		resp = b.do(t, getEv)
		wantStatus(t, resp, http.StatusOK)
		if v := view(t, resp); v.State != "queued" || v.TaskID != id {
			t.Fatalf("get: %s", resp.Body)
		}

		resp = b.do(t, loadEvent(t, "apigw-regenerate.json"))
		wantStatus(t, resp, http.StatusAccepted)
		if v := view(t, resp); v.ParentTaskID != id || v.CorrelationID != "release-notes-2026-01" {
			t.Fatalf("regenerate: %s", resp.Body)
		}

		resp = b.do(t, loadEvent(t, "apigw-cancel.json"))
		wantStatus(t, resp, http.StatusOK)
		if view(t, resp).State != "cancelled" {
			t.Fatalf("cancel: %s", resp.Body)
		}
		if counts, _ := drainQueue(t, e); len(counts) != 2 {
			t.Fatalf("queue %v, want the submitted task and its regeneration", counts)
		}
	})
}
