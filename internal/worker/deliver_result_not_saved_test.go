package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestDeliveryAcceptedButNotSavedOffersNoBlindRetry: a webhook receiver
// (not idempotent, no readback: the default endpoint) accepts the delivery
// with a 200, and every Complete of the receipt is throttled. The worker
// repeats it, then parks the task result_not_saved — it knows the delivery
// happened. The review is review.ResultNotSaved, worded for a generation:
// its safe actions start with "retry: … the provider is called again". For
// a delivery that is a second POST of an effect the destination confirmed
// (DESIGN §1.6: a review says "which actions are safe next"; §10: an
// effect is never repeated blind). An operator who follows it delivers
// twice.
//
// Sequence: claim v1, call-start mark, POST → 200 (side effect 1),
// Complete throttled → repeated → park result_not_saved → operator retry
// (opsapi.Apply, the safe action offered) → claim v2, POST → side effect 2.
//
// Want: no retry among the safe actions of a delivery known to have been
// accepted by a non-idempotent destination.
func TestDeliveryAcceptedButNotSavedOffersNoBlindRetry(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		rcv := newWebhookReceiver(t, 200)
		reg := webhookRegistryNoReadback(t, rcv, b.clock.Now)
		b.h.Destinations = reg
		task := b.create(t, "webhook-not-saved",
			`{"destination":"webhook","params":{"endpoint":"crm"},"payload":{"invoice":"INV-9"}}`,
			func(n *ledger.NewTask) { n.Kind = destination.KindDeliver })
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == task.TaskID && c.N >= 3 { // 1: the claim, 2: the call-start mark
				return faultinject.Throttle
			}
			return ""
		})
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if n := inj.Total(faultinject.Throttle); n < 2 {
			t.Fatalf("setup: the completion was sent %d times; want it repeated", n)
		}
		if n := rcv.deliveries(task.TaskID); n != 1 {
			t.Fatalf("setup: %d deliveries, want 1", n)
		}
		got := b.get(t, task.TaskID)
		r := mustReview(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || r.Reason != ledger.ReviewResultNotSaved {
			t.Fatalf("setup: task %s, review %q; want needs_review result_not_saved", got.State, r.Reason)
		}
		for _, a := range r.SafeActions {
			if strings.HasPrefix(a, "retry") {
				t.Fatalf("a delivery the non-idempotent receiver accepted (1 delivery, receipt not saved) is parked %s with the safe action %q: "+
					"a retry POSTs it again.\nsummary: %s\nwant no retry offered as safe (resolve as completed with the evidence)", r.Reason, a, r.Summary)
			}
		}
	})
}
