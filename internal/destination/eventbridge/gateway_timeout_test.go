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

// TestServerFaultsAreNoRefusal: a PutEvents answered by a failure on the
// way or in the service — a 504 from a proxy, a VPC endpoint or an egress
// gateway that gave up waiting; a 500 InternalException from the service
// failing while it handled the call — is not the service's answer that it
// refused the call and put nothing: the event may be on the bus.
// EventBridge does not deduplicate and cannot be read back, so a re-sent
// PutEvents is a second event; callErr must not steer these Throttled (a
// refusal, which the worker retries). The sibling AWS destinations (email,
// sns) and the providers (openai, bedrock) steer them Uncertain. Want:
// UnknownOutcome and Refused=false (DESIGN §1.4, §10).
func TestServerFaultsAreNoRefusal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name              string
		status            int
		contentType, body string
		errType           string
	}{
		{"504 gateway", http.StatusGatewayTimeout, "text/html", "<html><body><h1>504 Gateway Time-out</h1></body></html>", ""},
		{"500 InternalException", http.StatusInternalServerError, "application/x-amz-json-1.1",
			`{"__type":"InternalException","message":"An internal error occurred"}`, "InternalException"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				_, _ = io.Copy(io.Discard, r.Body) // it reached the bus's front: the event may have been put
				w.Header().Set("Content-Type", c.contentType)
				if c.errType != "" {
					w.Header().Set("X-Amzn-Errortype", c.errType)
				}
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
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
			_, err = d.Deliver(context.Background(), req("task-"+c.name))
			if n := requests.Load(); n != 1 {
				t.Fatalf("setup: sent %d times, want 1", n)
			}
			if cl := class(err); cl != retrypolicy.UnknownOutcome || retrypolicy.Refused(err) {
				t.Fatalf("a PutEvents answered %s (the event may be on the bus; EventBridge is not idempotent and has no readback) is %v (class %v, Refused=%v): "+
					"the worker retries it and puts a second event; want unknown_outcome, no refusal", c.name, err, cl, retrypolicy.Refused(err))
			}
		})
	}
}
