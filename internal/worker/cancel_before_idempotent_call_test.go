package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A cancel while running lands right after the claim of a generation whose
// provider honours idempotency keys and reads back (its calls are never
// marked). The model's window is full, so the worker's next write (the
// admission wait) is refused by the cancel, and the worker knows no call
// was made. Only the worker can know it: the reconciler cannot see an
// unmarked call, and after a cancel it waits the fenced lease's end plus
// the call timeout before trusting a readback's "not found" — past the age
// budget it would park the task saying its last attempt may have reached
// the provider. docs/protocol.md: a cancel of an effect ends "cancelled
// when the call never started".
func TestCancelBeforeAnUnmarkedCallEndsCancelledWhenTheWorkerKnewNoCallWasMade(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e) // the simulated provider: idempotency keys and readback
		task := b.create(t, "cancel-before-unmarked-call", prompt, func(n *ledger.NewTask) { n.MaxAge = time.Minute })
		b.send(t, task.TaskID)
		cancelAfterTheClaimInAFullWindow(t, b, task.TaskID)
		if n := len(b.sim.Events(task.TaskID)); n != 0 {
			t.Fatalf("setup: the provider was called (%d events)", n)
		}
		// The worker knew it made no call: it ends the cancel itself, and
		// no reconciler run past the age budget changes that.
		b.clock.Advance(61 * time.Second)
		s := b.reconcile(t, b.sim)
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateCancelled || !strings.Contains(got.ErrorMessage, "no call was made") {
			r, _ := b.l.GetReview(context.Background(), task.TaskID)
			var summary, uncertain string
			if r != nil {
				summary, uncertain = r.Summary, strings.Join(r.Uncertain, " | ")
			}
			t.Fatalf("cancelled before any provider call (the worker knew it), yet the task is %s (%s: %q); review %q, uncertain: %s; reconciler %+v",
				got.State, got.ReviewReason, got.ErrorMessage, summary, uncertain, s)
		}
	})
}

// cancelAfterTheClaimInAFullWindow delivers taskID's message to a worker
// whose model's admission window another caller has filled, with a cancel
// while running landing right after its claim: the worker's admission wait
// is refused by the cancel, and it knows it made no call.
func cancelAfterTheClaimInAFullWindow(t *testing.T, b *bundle, taskID string) {
	t.Helper()
	ctx := context.Background()
	a := withAdmission(b, t, admission.Limit{RequestsPerWindow: 1, TokensPerWindow: 10_000_000})
	if _, err := a.Admit(ctx, simulated.DefaultModel, 100); err != nil { // another caller fills the window
		t.Fatal(err)
	}
	var hookErr error
	b.h.Hooks = &worker.Hooks{AfterClaim: func(context.Context, string) error {
		cur, err := b.l.Get(ctx, taskID)
		if err == nil {
			_, err = b.l.CancelRunning(ctx, cur)
		}
		hookErr = err
		return nil
	}}
	handle(t, b.h, ctx, b.deliver(t, 1, 60))
	if hookErr != nil {
		t.Fatalf("setup: cancel after the claim: %v", hookErr)
	}
}
