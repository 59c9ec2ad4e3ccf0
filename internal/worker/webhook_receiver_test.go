package worker_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination/webhook"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// webhookReceiver is a webhook receiver that performs every POST (records the
// delivery by its webhook-id: a real side effect) and then answers with a
// fixed status — 303 See Other, the POST/redirect/GET answer of a server
// that processed the request ("the output of a POST action", RFC 9110
// §15.4.4). Its readback answers 200 for a recorded operation, 404 else
// (immediately consistent: NotFoundCredible).
type webhookReceiver struct {
	srv    *httptest.Server
	status int
	mu     sync.Mutex
	got    map[string]int
}

func newWebhookReceiver(t *testing.T, status int) *webhookReceiver {
	r := &webhookReceiver{status: status, got: map[string]int{}}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		id := q.Header.Get("webhook-id")
		switch {
		case q.Method == http.MethodPost && q.URL.Path == "/hooks":
			r.mu.Lock()
			r.got[id]++
			r.mu.Unlock()
			w.Header().Set("Location", "/deliveries/"+id)
			w.WriteHeader(r.status)
		case q.Method == http.MethodGet && strings.HasPrefix(q.URL.Path, "/deliveries/"):
			op := strings.TrimPrefix(q.URL.Path, "/deliveries/")
			r.mu.Lock()
			n := r.got[op]
			r.mu.Unlock()
			if n == 0 {
				http.NotFound(w, q)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"rcv-` + op + `"}`))
		default:
			http.NotFound(w, q)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *webhookReceiver) deliveries(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[op]
}

type staticSecrets map[string][]byte

func (s staticSecrets) Secret(_ context.Context, id string) ([]byte, error) {
	k, ok := s[id]
	if !ok {
		return nil, retrypolicy.Misconfigured(context.Canceled)
	}
	return k, nil
}

// webhookRegistry is a registry with the real webhook destination, one
// endpoint "crm" at rcv, with a credible readback.
func webhookRegistry(t *testing.T, rcv *webhookReceiver, now func() time.Time) *deliver.Registry {
	t.Helper()
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		t.Fatal(err)
	}
	secret, err := webhook.ParseSecret(webhook.SecretPrefix + base64.StdEncoding.EncodeToString(key[:]))
	if err != nil {
		t.Fatal(err)
	}
	hook, err := webhook.New(webhook.Options{
		Endpoints: map[string]webhook.Endpoint{"crm": {
			URL: rcv.srv.URL + "/hooks", SecretID: "arn:secret:crm",
			ReadbackURL: rcv.srv.URL + "/deliveries/{operation_id}", NotFoundCredible: true,
		}},
		Secrets:    staticSecrets{"arn:secret:crm": secret},
		HTTPClient: rcv.srv.Client(),
		Now:        now,
	})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := deliver.NewRegistry(hook)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func (b *bundle) reconcileDeliveries(t *testing.T, reg *deliver.Registry) reconciler.Summary {
	t.Helper()
	h := &reconciler.Handler{
		Ledger:       b.l,
		Dispatch:     &dispatch.Sender{SQS: b.e.SQS, QueueURL: b.e.Names.TaskQueueURL},
		Provider:     b.sim,
		Destinations: reg,
		Log:          logging.Discard(),
	}
	s, err := h.Handle(context.Background(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatalf("reconciler: %v (summary %+v)", err, s)
	}
	return s
}
