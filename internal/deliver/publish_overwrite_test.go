package deliver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// TestPublishReadbackOfOverwrittenURLIsNotCredibleAbsence: the simulated
// publisher reads a delivery back by fetching its canonical URL and
// comparing the content hash, and (immediately consistent) declares its
// "not found" credible evidence that the delivery never committed
// (DESIGN §10). But a URL showing other content is no evidence of absence:
// a later delivery to the same slug may have overwritten a publication that
// did happen. Treated as a credible "not found", the reconciler re-queues
// the uncertain delivery (package doc: "credible not found → re-queue") and
// the worker publishes it a second time — an effect repeated without proof
// that it never happened (DESIGN §1.4), which also puts the older artifact
// back over the newer one.
//
// Sequence: A publishes slug "press" → the publisher commits, the reply is
// lost (A unknown). B publishes other content to "press" → committed.
// The reconciler reads A back: the URL shows B's content.
// Want: not a proof of absence (A stays unknown, or is parked) — never
// ErrAbsent / a re-queue that sends A again.
func TestPublishReadbackOfOverwrittenURLIsNotCredibleAbsence(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	reg, sims := registry(t, c, dsim.Options{})
	pub := sims[dsim.Publish]

	a := deliver.Bind(reg, task("t_a", `{"destination":"publish","params":{"slug":"press"},"payload":{"v":1}}`))
	b := deliver.Bind(reg, task("t_b", `{"destination":"publish","params":{"slug":"press"},"payload":{"v":2}}`))
	pub.Script("t_a", dsim.AcceptLoseReply)
	if _, err := a.Generate(ctx, contract.Request{OperationID: "t_a", Attempt: 1}); retrypolicy.Classify(err).Class != retrypolicy.UnknownOutcome {
		t.Fatalf("A's lost reply: %v, want uncertain", err)
	}
	if _, err := b.Generate(ctx, contract.Request{OperationID: "t_b", Attempt: 1}); err != nil {
		t.Fatalf("B: %v", err)
	}
	if n := pub.SideEffects("t_a"); n != 1 {
		t.Fatalf("A published %d times before the readback, want 1", n)
	}

	_, err := a.(contract.Looker).Lookup(ctx, "t_a")
	if errors.Is(err, contract.ErrNotFound) {
		// What the reconciler does with it: re-queue, and the worker sends again.
		_, _ = a.Generate(ctx, contract.Request{OperationID: "t_a", Attempt: 2})
		t.Fatalf("A's readback after B overwrote the URL answered %v (ErrAbsent=%v): re-queued as proven absent, "+
			"A was then published %d times (want 1) and the URL shows A's older artifact again (%d side effects of B)",
			err, errors.Is(err, deliver.ErrAbsent), pub.SideEffects("t_a"), pub.SideEffects("t_b"))
	}
}
