package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// children are the tasks whose parent is id.
func children(t *testing.T, b *bundle, id string) []ledger.Task { return b.env.Children(t, id) }

func notify(t *testing.T) *followup.Config {
	t.Helper()
	c, err := followup.Parse(`{"page_origin":"https://tasks.example.com","requester":{"email":true}}`)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A result the provider's readback finds completes the task with its
// follow-ups in one transaction: the plan's deliveries and the
// requester's notification.
func TestReadbackCompletionCreatesThePlansDeliveriesAndTheNotification(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := unknownTask(t, b, "rb-plan", true, func(n *ledger.NewTask) {
			n.Plan = `{"deliver":[{"destination":"notify","params":{}},{"destination":"crm","params":{}}]}`
			n.RequesterEmail = "alice@example.com"
		})
		b.clock.Advance(2 * time.Minute)
		h := b.handler()
		h.Notify = notify(t)
		if s := handle(t, h); s.Completed != 1 {
			t.Fatalf("summary %+v, want 1 completed from readback", s)
		}
		got := get(t, b, task.TaskID)
		kids := children(t, b, task.TaskID)
		kinds := map[string]int{}
		for _, k := range kids {
			kinds[k.Provenance.Type]++
		}
		if got.State != ledger.StateCompleted || len(got.DeliveryIDs) != 2 || kinds[ledger.ProvenancePlan] != 2 || kinds[ledger.ProvenanceNotification] != 1 || len(kids) != 3 {
			t.Fatalf("task %s, delivery ids %v, follow-ups by provenance %v", got.State, got.DeliveryIDs, kinds)
		}
	})
}

// A park by the reconciler notifies the requester once, even when two
// runs race for it.
func TestReconcilerParkNotifiesTheRequesterOnce(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "old-notify", func(n *ledger.NewTask) { n.MaxAge = 5 * time.Minute; n.RequesterEmail = "alice@example.com" })
		b.clock.Advance(6 * time.Minute)
		cfg := notify(t)
		runTwice(t, b, func(h *reconciler.Handler) { h.Notify = cfg })
		got := get(t, b, task.TaskID)
		kids := children(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || len(kids) != 1 ||
			kids[0].IdempotencyKey != followup.Key(task.TaskID, followup.EventParked, 1, followup.EmailDestination) {
			t.Fatalf("task %s, notifications %+v; want parked and one notification", got.State, kids)
		}
	})
}
