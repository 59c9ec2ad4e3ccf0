package worker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestWebhookServerErrorAfterActingIsNotResent: docs/destinations.md
// promises that "a crash of the receiver mid-request" is an uncertain
// outcome, never repeated blind (DESIGN §1.4, §10: "An uncertain outcome on
// a non-idempotent destination is never re-sent"). A receiver whose
// handler commits the effect and then fails answers 500 (the unhandled
// exception of Express, Rails, Django, Flask), and a load balancer in
// front of a backend that died after committing answers 502; retrypolicy
// itself says a 5xx is no refusal ("may have acted"). The webhook adapter
// steers both Throttled (class transient, destination.Decide: "the
// destination refused the delivery for now; it did not act"), so the
// worker schedules a retry that POSTs the same delivery again.
//
// Sequence: claim v1, call-start mark, POST → the receiver records the
// delivery (side effect 1) and answers the status → ScheduleRetry → the
// reconciler re-sends the message → claim v2, POST again → side effect 2.
//
// Want: one delivery; the task unknown → parked unknown_outcome (no
// readback, not idempotent).
func TestWebhookServerErrorAfterActingIsNotResent(t *testing.T) {
	t.Parallel()
	for _, status := range []int{500, 502} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				ctx := context.Background()
				rcv := newWebhookReceiver(t, status)
				reg := webhookRegistryNoReadback(t, rcv, b.clock.Now)
				b.h.Destinations = reg
				task := b.create(t, fmt.Sprintf("webhook-acted-%d", status),
					`{"destination":"webhook","params":{"endpoint":"crm"},"payload":{"invoice":"INV-500"}}`,
					func(n *ledger.NewTask) { n.Kind = destination.KindDeliver })

				var trail []string
				b.send(t, task.TaskID)
				handle(t, b.h, ctx, b.deliver(t, 1, 120))
				got := b.get(t, task.TaskID)
				trail = append(trail, fmt.Sprintf("attempt %d → %s (%s) deliveries=%d", got.Attempts, got.State, got.ErrorClass, rcv.deliveries(task.TaskID)))
				for i := 0; i < 3 && got.State.Live() && got.State != ledger.StateUnknown; i++ {
					b.clock.Advance(time.Minute) // past not_before: the reconciler re-sends
					b.reconcileDeliveries(t, reg)
					handle(t, b.h, ctx, b.deliver(t, 1, 120))
					got = b.get(t, task.TaskID)
					trail = append(trail, fmt.Sprintf("attempt %d → %s (%s) deliveries=%d", got.Attempts, got.State, got.ErrorClass, rcv.deliveries(task.TaskID)))
				}
				if n := rcv.deliveries(task.TaskID); n != 1 {
					t.Fatalf("a non-idempotent webhook receiver without readback performed the POST and answered %d; "+
						"the worker re-sent it: %d deliveries of one operation.\ntrail: %s\nwant 1 delivery, the task unknown → parked unknown_outcome (DESIGN §1.4, §10)",
						status, n, strings.Join(trail, "; "))
				}
			})
		})
	}
}
