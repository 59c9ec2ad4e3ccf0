package soak

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/taskledger/taskledger/internal/destination"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The deliver rules catch a second side effect, a call after an uncertain
// outcome, a receipt that is not the destination's and an unknown_outcome
// park without a call — and pass a clean delivery.
func TestDeliveryRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &soak{cfg: Config{Seed: 1}, injected: map[Kind]int{}, kindCalls: map[Kind]int{}, kindEffects: map[Kind]int{}, maybeSav: map[string]int{}}
	var err error
	if s.dests, err = s.destinations(); err != nil {
		t.Fatal(err)
	}
	notify := s.dests.Sims[dsim.Notify]
	deliverOnce := func(id string, n int) destination.Receipt {
		in, _ := destination.ParseDeliverInput(json.RawMessage(deliverInput(DeliverOK, 1)))
		var rc destination.Receipt
		for range n {
			rc, _ = notify.Deliver(ctx, destination.Request{OperationID: id, Destination: dsim.Notify, Params: in.Params, Payload: in.Payload})
		}
		return rc
	}
	completed := func(id string, rc destination.Receipt) *ledger.Task {
		out, _ := json.Marshal(rc)
		return &ledger.Task{TaskID: id, State: ledger.StateCompleted, Input: deliverInput(DeliverOK, 1), Result: string(out)}
	}
	rules := func(t *task, st *ledger.Task, r *ledger.Review) []string {
		c := &checker{s: s, rows: map[Kind]*Row{}}
		c.delivery(t, st, r, 1, 1)
		var out []string
		for _, v := range c.violations {
			out = append(out, v.Rule)
		}
		return out
	}

	ok := &task{id: "t_ok", kind: DeliverOK}
	if got := rules(ok, completed(ok.id, deliverOnce(ok.id, 1)), nil); len(got) != 0 {
		t.Fatalf("a clean delivery: %v", got)
	}
	twice := &task{id: "t_twice", kind: DeliverOK}
	if got := rules(twice, completed(twice.id, deliverOnce(twice.id, 2)), nil); len(got) != 2 || got[0] != "duplicate_delivery" || got[1] != "delivery_recalled_after_uncertain" {
		t.Fatalf("two deliveries: %v", got)
	}
	other := &task{id: "t_other", kind: DeliverOK}
	rc := deliverOnce(other.id, 1)
	rc.PayloadSHA256 = "0000"
	if got := rules(other, completed(other.id, rc), nil); len(got) != 1 || got[0] != "receipt_not_the_destinations" {
		t.Fatalf("a receipt of other bytes: %v", got)
	}
	never := &task{id: "t_never", kind: DeliverNoReadback}
	parked := &ledger.Task{TaskID: never.id, State: ledger.StateNeedsReview, ReviewReason: ledger.ReviewUnknownOutcome}
	if got := rules(never, parked, nil); len(got) != 1 || got[0] != "false_uncertainty" {
		t.Fatalf("unknown_outcome without a call: %v", got)
	}
}
