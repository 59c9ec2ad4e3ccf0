package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/webhook"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// recipeReceiver is the receiver recipe of docs/destinations.md, as a
// receiving team would write it with the Standard Webhooks library:
// verify the signature over the exact body, refuse anything not approved if
// you must, then act at most once per webhook-id and answer the same
// receipt to a redelivery. GET /deliveries/{id} is the optional readback.
type recipeReceiver struct {
	wh *standardwebhooks.Webhook

	mu   sync.Mutex
	done map[string]string // webhook-id → our receipt (a table with a unique key, in production)
	acts int               // the side effects performed
}

func (rr *recipeReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	// 1. Verify: signature over id.timestamp.body, timestamp within 5 min.
	if err := rr.wh.Verify(body, r.Header); err != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	id := r.Header.Get("webhook-id")
	if r.Method == http.MethodGet { // readback: do we have it?
		rr.mu.Lock()
		receipt, ok := rr.done[strings.TrimPrefix(r.URL.Path, "/deliveries/")]
		rr.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"id": receipt})
		return
	}
	var msg webhook.Body
	if err := json.Unmarshal(body, &msg); err != nil || msg.Data.OperationID != id {
		http.Error(w, "not a taskledger delivery", http.StatusBadRequest)
		return
	}
	// 2. Deduplicate by webhook-id: act once, answer the same receipt to
	// every redelivery. Record and act atomically (here: under one lock;
	// in production a conditional insert of the id in the same
	// transaction as the effect).
	rr.mu.Lock()
	receipt, seen := rr.done[id]
	if !seen {
		rr.acts++ // the side effect
		receipt = "rcpt-" + id
		rr.done[id] = receipt
	}
	rr.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]string{"id": receipt})
}

func (rr *recipeReceiver) Acts() int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.acts
}

func TestReceiverRecipeVerifiesAndDeduplicatesRedeliveries(t *testing.T) {
	t.Parallel()
	secret := newSecret(t)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	rr := &recipeReceiver{wh: wh, done: map[string]string{}}
	srv := httptest.NewTLSServer(rr)
	t.Cleanup(srv.Close)
	secrets := &staticSecrets{secrets: map[string]string{"arn:secret:team": secret, "arn:secret:other": newSecret(t)}}
	h, err := webhook.New(webhook.Options{Secrets: secrets, HTTPClient: srv.Client(), Endpoints: map[string]webhook.Endpoint{
		"team":  {URL: srv.URL + "/hooks", SecretID: "arn:secret:team", ReadbackURL: srv.URL + "/deliveries/{operation_id}", NotFoundCredible: true},
		"forge": {URL: srv.URL + "/hooks", SecretID: "arn:secret:other"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := destination.Request{OperationID: "t_recipe1", Attempt: 1, Destination: webhook.Name, Params: json.RawMessage(`{"endpoint":"team"}`),
		Payload: json.RawMessage(`{"text":"hello"}`), Provenance: &destination.Provenance{Type: destination.ProvenanceDirect, Caller: "jwt:alice"}}

	first, err := h.Deliver(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	// A redelivery of the same operation (as after a lost reply whose
	// readback could not decide, or an operator's retry): a new request,
	// newly signed, with the same webhook-id.
	r.Attempt = 2
	second, err := h.Deliver(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if n := rr.Acts(); n != 1 {
		t.Fatalf("the receiver acted %d times for one webhook-id, want 1", n)
	}
	if first.ProviderRef == "" || second.ProviderRef != first.ProviderRef {
		t.Fatalf("receipts %q and %q, want the same one", first.ProviderRef, second.ProviderRef)
	}
	rb, err := h.Lookup(ctx, r)
	if err != nil || rb.ProviderRef != first.ProviderRef || rb.ReadbackResult != destination.ReadbackFound {
		t.Fatalf("readback: %+v %v", rb, err)
	}
	// A request signed with another key is refused before anything happens.
	forged := r
	forged.OperationID = "t_recipe2"
	forged.Params = json.RawMessage(`{"endpoint":"forge"}`)
	if _, err := h.Deliver(ctx, forged); retrypolicy.Classify(err).Class != retrypolicy.PermanentConfig {
		t.Fatalf("a delivery signed with the wrong key: %v, want refused (401 → misconfigured)", err)
	}
	if n := rr.Acts(); n != 1 {
		t.Fatalf("acts = %d after a forged delivery, want 1", n)
	}
}
