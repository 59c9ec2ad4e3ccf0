package soak

import (
	"fmt"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The invariants of deliver tasks (DESIGN §10). The soak's
// destinations are not idempotent, and every call they count acts (the
// only scripted fault, accept_lose_reply, acts too), so:
//
//   - at most one destination side effect per operation id;
//   - never called again after an uncertain outcome unless a readback
//     proved the delivery absent — which, since every counted call acted,
//     means at most one call per operation id;
//   - a completed deliver task's result is the destination's receipt for
//     this operation and payload, with one delivery behind it;
//   - parked unknown_outcome only after a call was made.
func (c *checker) delivery(t *task, st *ledger.Task, r *ledger.Review, saves, gens int) {
	s := c.s
	d := s.dests.Sims[destinationOf(t.kind)]
	effects, calls := d.SideEffects(t.id), d.Calls(t.id)
	if calls > 0 {
		// The kind's fault (or, for DeliverOK, the delivery itself) fired:
		// its scripted fault is the first call's. (The checker holds s.mu.)
		s.injected[t.kind]++
	}
	row := c.row(t.kind)
	row.Note = fmt.Sprintf("%s: %d calls, %d side effects in all", d.Name(), s.kindCalls[t.kind]+calls, s.kindEffects[t.kind]+effects)
	s.kindCalls[t.kind] += calls
	s.kindEffects[t.kind] += effects
	if effects > 1 {
		c.add(t.kind, t.id, "duplicate_delivery", "%d side effects at %s for one operation id", effects, d.Name())
	}
	if calls > 1 {
		c.add(t.kind, t.id, "delivery_recalled_after_uncertain", "%s called %d times for one operation id (every call acted: none was proven absent)", d.Name(), calls)
	}
	switch st.State {
	case ledger.StateCompleted:
		rc, ok := deliver.ReceiptOf(st.Result)
		in, err := destination.ParseDeliverInput([]byte(st.Input))
		switch {
		case saves > gens || saves+s.maybeSav[t.id] < gens:
			c.add(t.kind, t.id, "completed_without_one_save", "completed with %d result writes seen (%d more without an answer)", saves, s.maybeSav[t.id])
		case effects < 1:
			c.add(t.kind, t.id, "receipt_without_delivery", "completed, but %s performed %d deliveries", d.Name(), effects)
		case !ok || err != nil || rc.OperationID != t.id || rc.Destination != d.Name() || rc.PayloadSHA256 != destination.HashPayload(in.Payload):
			c.add(t.kind, t.id, "receipt_not_the_destinations", "the saved result is not %s's receipt for this operation and payload", d.Name())
		case t.kind == DeliverLaggingReadback && rc.ReadbackResult != destination.ReadbackContentMatch:
			c.add(t.kind, t.id, "lagging_readback_not_read_back", "completed without the content-hash readback (readback_result %q)", rc.ReadbackResult)
		}
	case ledger.StateNeedsReview:
		reason := st.ReviewReason
		if r != nil {
			reason = r.Reason
		}
		if reason == ledger.ReviewUnknownOutcome && calls == 0 {
			c.add(t.kind, t.id, "false_uncertainty", "parked unknown_outcome, but %s was never called", d.Name())
		}
	default:
		if st.Result != "" {
			c.add(t.kind, t.id, "result_on_unfinished_task", "state %s carries a result", st.State)
		}
	}
	if t.kind == DeliverNoReadback && st.State == ledger.StateCompleted && st.ReadbackAt != "" {
		c.add(t.kind, t.id, "readback_without_readback", "completed from a readback %s does not offer", dsim.CRM)
	}
}
