package worker_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/webhook"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// kReceiver is a webhook receiver that performs every POST (records the
// delivery by its webhook-id: a real side effect) and then answers with a
// fixed status — 303 See Other, the POST/redirect/GET answer of a server
// that processed the request ("the output of a POST action", RFC 9110
// §15.4.4). Its readback answers 200 for a recorded operation, 404 else
// (immediately consistent: NotFoundCredible).
type kReceiver struct {
	srv    *httptest.Server
	status int
	mu     sync.Mutex
	got    map[string]int
}

func newKReceiver(t *testing.T, status int) *kReceiver {
	r := &kReceiver{status: status, got: map[string]int{}}
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

func (r *kReceiver) deliveries(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[op]
}

type kSecrets map[string][]byte

func (s kSecrets) Secret(_ context.Context, id string) ([]byte, error) {
	k, ok := s[id]
	if !ok {
		return nil, retrypolicy.Misconfigured(context.Canceled)
	}
	return k, nil
}

// kWebhookRegistry is a registry with the real webhook destination, one
// endpoint "crm" at rcv, with a credible readback.
func kWebhookRegistry(t *testing.T, rcv *kReceiver, now func() time.Time) *deliver.Registry {
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
		Secrets:    kSecrets{"arn:secret:crm": secret},
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

// TestAttackReviewKWebhookActedThen303IsSettledAsNotActed (adversarial
// review k, commits 9aad545 and 90759df): definiteRefusal counts every
// PermanentConfig and PermanentInput error as "the provider did not act",
// and the worker now lets such an error settle an assignment the
// reconciler (or a cancel) got to first. The real webhook adapter maps
// every 3xx to Misconfigured (webhook.go statusErr: "3xx, 404, 410
// Misconfigured") — yet a 303 See Other is precisely the answer of a
// receiver that performed the POST and points at its result. So a
// delivery that happened is settled as one that did not:
//
//	claim (v), call-start mark, POST: the receiver records the delivery
//	(1 side effect) and answers 303 → Misconfigured → definiteRefusal;
//	before the worker's settling write, either
//	  cancel:  the caller cancels (CancelRunning: unknown at v+1,
//	           cancel_version v) → parkRefused → cancelledKnown →
//	           CancelUnknown: the task ends cancelled, "the provider
//	           refused the call (permanent_config), so it did not act";
//	  lapsed:  the reconciler expires the slow worker's lease (unknown at
//	           v) → parkRefused parks from unknown at v: destination_config,
//	           "nothing was delivered by this attempt", safe action "retry"
//	           (a second delivery).
//
// Before these commits the refused write was fenced and the reconciler's
// unknown rule read the endpoint back: the delivery is there (200), so the
// task completes with its receipt (DESIGN §1.4: resolved by readback).
func TestAttackReviewKWebhookActedThen303IsSettledAsNotActed(t *testing.T) {
	for _, c := range []struct {
		mode   string
		status int
	}{
		{"cancel", http.StatusSeeOther},
		{"lapsed", http.StatusSeeOther},
		// Controls: a 503 after acting is no refusal (review J); the
		// reconciler's readback completes the task — the harness works.
		{"cancel_control_503", http.StatusServiceUnavailable},
		{"lapsed_control_503", http.StatusServiceUnavailable},
	} {
		mode := strings.TrimSuffix(c.mode, "_control_503")
		t.Run(c.mode, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				ctx := context.Background()
				rcv := newKReceiver(t, c.status)
				reg := kWebhookRegistry(t, rcv, b.clock.Now)
				b.h.Destinations = reg
				task := b.create(t, "k-webhook-"+c.mode,
					`{"destination":"webhook","params":{"endpoint":"crm"},"payload":{"invoice":"INV-1"}}`,
					func(n *ledger.NewTask) { n.Kind = destination.KindDeliver })

				// Through the real adapter: the receiver acts and answers 303.
				step := deliver.Bind(reg, deliver.Task{TaskID: "probe-" + mode, Input: task.Input})
				_, perr := step.Generate(ctx, contract.Request{OperationID: "probe-" + mode, Attempt: 1})
				// Fixed twice over: the webhook adapter classes a 303 as
				// an unknown outcome (the readback decides), and a 3xx
				// under any class is no refusal (retrypolicy.Refused).
				if cl := retrypolicy.Classify(perr); c.status == http.StatusSeeOther && cl.Class != retrypolicy.UnknownOutcome {
					t.Fatalf("setup: webhook 303 classified %+v (%v); want unknown_outcome", cl, perr)
				}
				if retrypolicy.Refused(perr) {
					t.Fatalf("setup: a %d after the delivery counts as a refusal (%v)", c.status, perr)
				}

				raced := raceTheSave(t, b, task.TaskID, mode)
				b.send(t, task.TaskID)
				handle(t, b.h, ctx, b.deliver(t, 1, 120))
				raced()
				if n := rcv.deliveries(task.TaskID); n != 1 {
					t.Fatalf("setup: the receiver has %d deliveries of %s; want the one behind the 303", n, task.TaskID)
				}
				afterWorker := b.get(t, task.TaskID)
				got := afterWorker
				for range 5 {
					if !got.State.Live() {
						break
					}
					b.clock.Advance(time.Minute)
					b.reconcileDeliveries(t, reg)
					got = b.get(t, task.TaskID)
				}
				var known string
				if r, _ := b.l.GetReview(ctx, task.TaskID); r != nil {
					known = strings.Join(r.Known, " | ")
				}
				dup := ""
				if got.State == ledger.StateNeedsReview && got.ReviewReason == "destination_config" {
					// Follow the review's safe action: "fix …, then retry".
					if _, _, _, err := b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops@example.com"}); err != nil {
						t.Fatalf("operator retry: %v", err)
					}
					b.h.Hooks = nil
					b.send(t, task.TaskID)
					handle(t, b.h, ctx, b.deliver(t, 1, 120))
					dup = fmt.Sprintf("; following its safe action (retry) the receiver now has %d deliveries of the one operation", rcv.deliveries(task.TaskID))
				}
				if got.State != ledger.StateCompleted {
					t.Fatalf("the receiver performed the delivery (1 recorded) and answered 303 See Other; its readback shows it. "+
						"The worker took the 303 for a refusal in so many words (definiteRefusal: permanent_config) and settled the assignment the %s had made uncertain: "+
						"after the worker %s (review %q, error %q: %q), finally %s; review known: %s%s — want completed from the readback (DESIGN §1.4, §1.6)",
						mode, afterWorker.State, afterWorker.ReviewReason, afterWorker.ErrorClass, afterWorker.ErrorMessage, got.State, known, dup)
				}
			})
		})
	}
}
