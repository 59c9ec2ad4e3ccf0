package eventbridge_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/destination/eventbridge"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// TestGatewayTimeoutIsNoRefusal: a 504 Gateway Timeout — a proxy, a VPC
// endpoint or a corporate egress gateway in front of the bus that gave up
// waiting — is not the service's answer that it refused the call and put
// nothing: the PutEvents may have been put. EventBridge does not
// deduplicate (Guarantees: not idempotent, no readback), so a re-sent
// PutEvents is a second event; callErr must not steer the 504 Throttled (a
// refusal: retrypolicy.Refused, which the worker retries and charges
// nothing). The project's own providers steer 504 Uncertain (openai,
// bedrock); the worker's Refused says a 5xx is no refusal. Want:
// UnknownOutcome and Refused=false.
func TestGatewayTimeoutIsNoRefusal(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body) // the gateway forwarded it; the bus may have put it
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusGatewayTimeout)
		_, _ = io.WriteString(w, "<html><body><h1>504 Gateway Time-out</h1></body></html>")
	}))
	t.Cleanup(srv.Close)
	cfg, err := awsclient.Load(context.Background(), awsclient.Options{Endpoint: srv.URL, StaticCredentials: true, Region: "us-east-1", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	d, err := eventbridge.New(eventbridge.Options{BusARN: "arn:aws:events:us-east-1:123456789012:event-bus/orders", Client: awseb.NewFromConfig(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Deliver(context.Background(), req("task-504"))
	if n := requests.Load(); n != 1 {
		t.Fatalf("setup: sent %d times, want 1", n)
	}
	if c := class(err); c != retrypolicy.UnknownOutcome || retrypolicy.Refused(err) {
		t.Fatalf("a PutEvents answered 504 by a gateway (the event may be on the bus; EventBridge is not idempotent and has no readback) is %v (class %v, Refused=%v): "+
			"the worker retries it and puts a second event; want unknown_outcome, no refusal (DESIGN §1.4, §10)", err, c, retrypolicy.Refused(err))
	}
}
