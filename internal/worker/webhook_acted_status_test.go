package worker_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// TestWebhookActedThenNonRefusalStatusCompletesFromTheReadback:
// retrypolicy.Refused says, in so many words, that a 3xx ("a 303 See Other
// is how a server that processed a POST answers") and a 409 ("under an
// idempotency key, an earlier request with the same key is still being
// processed") are no refusal: the destination may have acted. The worker's
// definiteRefusal is Refused, and it decides whether the worker's knowledge
// may settle an assignment the reconciler got to first — for every class
// these statuses are steered to:
//
//   - 409: the webhook adapter steers "other 4xx" Permanent (class
//     permanent_input). The PermanentInput failure path must consult
//     Refused too: a Fail that always carried ledger.AfterRefusal() would
//     fail the task over the reconciler's unknown_outcome park ("the
//     provider answered and did not act", FailLapsed), and cancelledRefusal
//     would end a cancelled one as "refused … so it did not act"; plainly
//     (no race) the delivery the receiver performed would end `failed`
//     (DESIGN §1.4: unknown is not failed — the readback finds it).
//   - 302/303: a 302 Found is what Rails' redirect_to, Express'
//     res.redirect, Django's and Flask's redirect send after a processed
//     POST by default, and a 303 is the POST/redirect/GET answer. Steered
//     as a configuration refusal, the worker would park it
//     destination_config ("a configuration refusal comes before the
//     destination acts: nothing was delivered by this attempt", safe action
//     retry → a second delivery), a cancel would end it cancelled ("so it
//     did not act"), and a lapsed lease would leave the same status to the
//     readback, which completes it: the outcome would depend on a race.
//
// Each case: the receiver records the POST (a real side effect), answers
// the status; its readback (immediately consistent) shows the delivery.
// Want: completed from the readback, one delivery (DESIGN §1.4, §1.6).
func TestWebhookActedThenNonRefusalStatusCompletesFromTheReadback(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mode   string
		status int
	}{
		{"plain_409", http.StatusConflict},
		{"lapsed_409", http.StatusConflict},
		{"cancel_409", http.StatusConflict},
		{"plain_302", http.StatusFound},
		{"cancel_303", http.StatusSeeOther},
		{"lapsed_303", http.StatusSeeOther},
		// Controls: the harness reaches completed when the worker leaves
		// the outcome to the readback.
		{"lapsed_302_control", http.StatusFound},
		{"plain_303_control", http.StatusSeeOther},
		// A 503 after acting is no refusal either.
		{"cancel_503_control", http.StatusServiceUnavailable},
		{"lapsed_503_control", http.StatusServiceUnavailable},
	} {
		mode := strings.SplitN(c.mode, "_", 2)[0]
		t.Run(c.mode, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				ctx := context.Background()
				rcv := newWebhookReceiver(t, c.status)
				reg := webhookRegistry(t, rcv, b.clock.Now)
				b.h.Destinations = reg
				task := b.create(t, "webhook-"+c.mode,
					`{"destination":"webhook","params":{"endpoint":"crm"},"payload":{"invoice":"INV-1"}}`,
					func(n *ledger.NewTask) { n.Kind = destination.KindDeliver })

				step := deliver.Bind(reg, deliver.Task{TaskID: "probe-" + c.mode, Input: task.Input, Provenance: deliver.ProvenanceOf(task)})
				_, perr := step.Generate(ctx, contract.Request{OperationID: "probe-" + c.mode, Attempt: 1})
				if retrypolicy.Refused(perr) {
					t.Fatalf("setup: Refused(%d)=true (%v); this test assumes Refused says may-have-acted", c.status, perr)
				}
				class := retrypolicy.Classify(perr).Class

				raced := raceTheSave(t, b, task.TaskID, mode)
				b.send(t, task.TaskID)
				handle(t, b.h, ctx, b.deliver(t, 1, 120))
				raced()
				if n := rcv.deliveries(task.TaskID); n != 1 {
					t.Fatalf("setup: the receiver has %d deliveries; want 1", n)
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
					if _, _, _, err := b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops@example.com"}); err != nil {
						t.Fatalf("operator retry: %v", err)
					}
					b.h.Hooks = nil
					b.send(t, task.TaskID)
					handle(t, b.h, ctx, b.deliver(t, 1, 120))
					dup = fmt.Sprintf("; following its safe action (retry), the receiver now has %d deliveries of the one operation", rcv.deliveries(task.TaskID))
				}
				if got.State != ledger.StateCompleted {
					t.Fatalf("the receiver performed the delivery and answered %d (adapter class %s, Refused=false: 'may have acted'); its readback shows it. "+
						"After the worker (%s): %s (review %q, error %q: %q); finally %s; review known: %s%s — want completed from the readback (DESIGN §1.4, §1.6)",
						c.status, class, mode, afterWorker.State, afterWorker.ReviewReason, afterWorker.ErrorClass, afterWorker.ErrorMessage, got.State, known, dup)
				}
			})
		})
	}
}
