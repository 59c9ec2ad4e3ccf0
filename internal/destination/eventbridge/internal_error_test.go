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

// TestServiceInternalErrorIsNoRefusal: a PutEvents answered 500
// InternalException is the service failing while it handled the call, not
// the service refusing it: the event may be on the bus. The sibling AWS
// destinations say so in as many words (email: "InternalServiceErrorException
// and other server-side failures: SES may have accepted the message"; sns:
// "InternalError …: SNS may have accepted the message") and steer it
// Uncertain. EventBridge is neither idempotent nor readable back, yet its
// callErr reads every service error answer as "it refused the call and put
// nothing" and steers it Throttled — a refusal the worker retries, putting
// a second event (DESIGN §1.4, §10: an uncertain outcome on a
// non-idempotent destination is never re-sent).
//
// Want: UnknownOutcome and Refused=false.
func TestServiceInternalErrorIsNoRefusal(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-Errortype", "InternalException")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"__type":"InternalException","message":"An internal error occurred"}`)
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
	_, err = d.Deliver(context.Background(), req("task-500"))
	if n := requests.Load(); n != 1 {
		t.Fatalf("setup: sent %d times, want 1", n)
	}
	if c := class(err); c != retrypolicy.UnknownOutcome || retrypolicy.Refused(err) {
		t.Fatalf("a PutEvents answered 500 InternalException (the event may be on the bus; EventBridge is not idempotent and has no readback) is %v (class %v, Refused=%v): "+
			"the worker retries it and puts a second event; want unknown_outcome, no refusal (DESIGN §1.4, §10)", err, c, retrypolicy.Refused(err))
	}
}
