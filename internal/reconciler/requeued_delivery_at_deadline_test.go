package reconciler_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	simdest "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRequeuedDeliveryAtItsDeadlineIsNotReviewedAsNeverDelivered: a deliver
// task to a destination that deduplicates by operation id but cannot be
// read back (an idempotent notifier). Its worker's call reaches the
// destination, which delivers; the reply is lost and the worker vanishes.
// The expired lease is re-queued (sending again is harmless), its error
// saying the outcome is unknown. No new attempt starts before the age
// deadline, so the relay hands the task to the readback
// (ledger.AwaitReadback). The destination has no readback, so its "not
// found" proves nothing (deliver.Step answers contract.ErrNotFound without
// deliver.ErrAbsent). DESIGN §1.6: the review must not say that the
// readback credibly found no record and nothing was generated: the
// delivery happened, and an operator who believes the review resolves it
// as failed.
func TestRequeuedDeliveryAtItsDeadlineIsNotReviewedAsNeverDelivered(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task, _, h := deliveredWithLostReply(t, b, "requeued-delivery-at-deadline", 2*time.Minute)
		deadline := time.UnixMilli(task.DeadlineMs)

		b.clock.Set(deadline.Add(-time.Minute)) // lease expired 90 s ago, budget left
		if s := handle(t, h()); s.Requeued != 1 {
			t.Fatalf("summary = %+v, want the expired lease re-queued (the destination deduplicates)", s)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL) // the re-sent message is not consumed in time

		b.clock.Set(deadline.Add(time.Minute))
		s := handle(t, h())
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview {
			t.Fatalf("task %s (run %+v), want needs_review past its age deadline", got.State, s)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		all := r.Summary + "\n" + strings.Join(r.Known, "\n") + "\n" + strings.Join(r.Uncertain, "\n")
		if strings.Contains(all, "nothing was generated") || strings.Contains(all, "credibly found no record") {
			t.Fatalf("the destination delivered (1 side effect) and cannot be read back, but the review (%s) says:\n%s", r.Reason, all)
		}
	})
}

// deliveredWithLostReply creates a deliver task to a destination that
// deduplicates by operation id but cannot be read back (an idempotent
// notifier), with a 10-minute age budget, and claims it when `before` is
// left of that budget. Its worker's call reaches the destination, which
// delivers; the reply is lost. h builds a reconciler with the destination.
func deliveredWithLostReply(t *testing.T, b *bundle, key string, before time.Duration) (task, claimed *ledger.Task, h func() *reconciler.Handler) {
	t.Helper()
	g := destination.Guarantees{Idempotent: true, Readback: destination.ReadbackNone}
	sd, err := simdest.New(simdest.Notify, simdest.Options{Now: b.clock.Now, Guarantees: &g})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := deliver.NewRegistry(sd)
	if err != nil {
		t.Fatal(err)
	}
	h = func() *reconciler.Handler { x := b.handler(); x.Destinations = reg; return x }
	task = create(t, b, key, func(n *ledger.NewTask) {
		n.Kind = deliver.Kind
		n.Input = `{"destination":"notify","params":{"to":"ops@example.com"},"payload":{"text":"invoice ` + key + ` is ready"}}`
		n.MaxAge = 10 * time.Minute
	})
	b.clock.Set(time.UnixMilli(task.DeadlineMs).Add(-before))
	c := claim(t, b, task.TaskID)
	sd.Script(task.TaskID, simdest.AcceptLoseReply)
	step := deliver.Bind(reg, deliver.Task{TaskID: c.TaskID, Input: c.Input, Provenance: deliver.ProvenanceOf(c)})
	if _, err := step.Generate(ctx, contract.Request{OperationID: c.TaskID, Attempt: 1, Kind: c.Kind, Input: json.RawMessage(c.Input)}); err == nil {
		t.Fatal("scripted accept_lose_reply returned no error")
	}
	if n := sd.SideEffects(task.TaskID); n != 1 {
		t.Fatalf("setup: %d deliveries, want 1", n)
	}
	return task, c, h
}
