package worker_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/webhook"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// webhookRegistryNoReadback is webhookRegistry's endpoint "crm" at rcv
// as most receivers are configured: not idempotent (the default — "Leave
// false unless its operators promise it") and no readback URL.
func webhookRegistryNoReadback(t *testing.T, rcv *webhookReceiver, now func() time.Time) *deliver.Registry {
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
		Endpoints:  map[string]webhook.Endpoint{"crm": {URL: rcv.srv.URL + "/hooks", SecretID: "arn:secret:crm"}},
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

// TestWebhookGatewayTimeoutIsNotResent: DESIGN §1.4: "When an attempt's
// outcome is uncertain (a timeout after the provider may have accepted),
// the task goes to unknown … never blindly re-sent when the step has
// external side effects"; §10: "An uncertain outcome on a non-idempotent
// destination is never re-sent".
//
// A 504 Gateway Timeout (and Cloudflare's 524 "a timeout occurred") is
// exactly that timeout: the gateway in front of the receiver gave up
// waiting while the receiver worked on the POST. The OpenAI adapter steers
// 504/524 Uncertain ("the server may have generated"), Bedrock steers 504
// Uncertain, and retrypolicy.Refused says a 5xx is no refusal ("may have
// acted"). The webhook adapter — the one step whose side effect is
// external by definition, and whose receivers are "assumed not to
// deduplicate" — must not steer them Throttled (class transient,
// destination.Decide "the destination refused the delivery for now; it did
// not act"): the worker would schedule a retry that POSTs the same delivery
// again, up to max_attempts times.
//
// Sequence (no race, no fault of ours): claim v1, call-start mark, POST →
// the receiver records the delivery (side effect 1), the gateway answers
// 504. Were it a refusal: ScheduleRetry (retry_wait, "transient") → the
// reconciler re-sends the message once not_before passed → claim v2, POST
// again → side effect 2 … until max_attempts, then budget_exhausted whose
// review offers a retry of a delivery that was made five times.
//
// Want: one delivery; the task unknown → parked unknown_outcome (no
// readback, not idempotent).
func TestWebhookGatewayTimeoutIsNotResent(t *testing.T) {
	t.Parallel()
	// 500 and 502 too: a receiver's unhandled exception after its commit,
	// or a load balancer whose backend died after it, says no more.
	for _, status := range []int{504, 524, 500, 502} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				ctx := context.Background()
				rcv := newWebhookReceiver(t, status)
				reg := webhookRegistryNoReadback(t, rcv, b.clock.Now)
				b.h.Destinations = reg
				task := b.create(t, fmt.Sprintf("webhook-%d", status),
					`{"destination":"webhook","params":{"endpoint":"crm"},"payload":{"invoice":"INV-504"}}`,
					func(n *ledger.NewTask) { n.Kind = destination.KindDeliver })

				// The adapter's own view of the status, for the message.
				probe := deliver.Bind(reg, deliver.Task{TaskID: "probe", Input: task.Input, Provenance: deliver.ProvenanceOf(task)})
				_, perr := probe.Generate(ctx, contract.Request{OperationID: "probe", Attempt: 1})
				class, refused := retrypolicy.Classify(perr).Class, retrypolicy.Refused(perr)

				var trail []string
				b.send(t, task.TaskID)
				handle(t, b.h, ctx, b.deliver(t, 1, 120))
				got := b.get(t, task.TaskID)
				trail = append(trail, fmt.Sprintf("attempt %d → %s (%s) deliveries=%d", got.Attempts, got.State, got.ErrorClass, rcv.deliveries(task.TaskID)))
				for i := 0; i < 8 && got.State.Live() && got.State != ledger.StateUnknown; i++ {
					b.clock.Advance(time.Minute) // past not_before: the reconciler re-sends
					b.reconcileDeliveries(t, reg)
					handle(t, b.h, ctx, b.deliver(t, 1, 120))
					got = b.get(t, task.TaskID)
					trail = append(trail, fmt.Sprintf("attempt %d → %s (%s) deliveries=%d", got.Attempts, got.State, got.ErrorClass, rcv.deliveries(task.TaskID)))
				}
				if n := rcv.deliveries(task.TaskID); n != 1 {
					var safe, summary string
					if r, _ := b.l.GetReview(ctx, task.TaskID); r != nil {
						safe, summary = strings.Join(r.SafeActions, " | "), r.Summary
					}
					t.Fatalf("a non-idempotent webhook receiver without readback performed the POST and its gateway answered %d "+
						"(adapter class %s, Refused=%v: 'may have acted'); the worker re-sent it: the receiver has %d deliveries of one operation.\n"+
						"trail: %s\nfinal: %s (review %q: %s)\nsafe actions: %s\nwant 1 delivery, the task unknown → parked unknown_outcome (DESIGN §1.4, §10)",
						status, class, refused, n, strings.Join(trail, "; "), got.State, got.ReviewReason, summary, safe)
				}
			})
		})
	}
}
