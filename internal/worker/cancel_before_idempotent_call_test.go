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
// marked). The model's window is full, so the worker puts the task back to
// wait (ledger.WaitAdmission); the cancel refuses that write, and the
// worker knows no call was made (knowNoCall). docs/protocol.md: a cancel
// while running of an effect ends "cancelled when the call never started".
// The worker sends nothing, leaving it to the reconciler, which cannot see
// an unmarked call and, after a cancel, waits the fenced lease's end plus
// the call timeout before trusting its readback's "not found". When the
// age budget ends first, the task is parked budget_exhausted, its review
// saying its last attempt may have reached the provider — what the worker
// knew did not happen (DESIGN §1.6: the review must tell what is known).
//
// Sequence (lease 30 s, age budget 60 s, simulated call timeout 1 min):
// C claim; the caller cancels (unknown at v+1, due at C+30); admission
// refused → WaitAdmission refused → no call; C+61 the reconciler runs.
func TestCancelBeforeAnUnmarkedCallEndsCancelledWhenTheWorkerKnewNoCallWasMade(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e) // the simulated provider: idempotency keys and readback
		ctx := context.Background()
		limits := map[string]admission.Limit{simulated.DefaultModel: {RequestsPerWindow: 1, TokensPerWindow: 10_000_000}}
		a, err := admission.New(admission.Config{DB: e.DDB, TasksTable: e.Names.TasksTable, Now: b.clock.Now, Limits: limits})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Admit(ctx, simulated.DefaultModel, 100); err != nil { // another caller fills the window
			t.Fatal(err)
		}
		b.h.Admission = &worker.Admission{Admitter: a, Model: simulated.DefaultModel}
		task := b.create(t, "cancel-before-unmarked-call", prompt, func(n *ledger.NewTask) { n.MaxAge = time.Minute })
		var hookErr error
		b.h.Hooks = &worker.Hooks{AfterClaim: func(context.Context, string) error {
			cur, err := b.l.Get(ctx, task.TaskID)
			if err == nil {
				_, err = b.l.CancelRunning(ctx, cur)
			}
			hookErr = err
			return nil
		}}
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if hookErr != nil {
			t.Fatalf("setup: cancel after the claim: %v", hookErr)
		}
		if n := len(b.sim.Events(task.TaskID)); n != 0 {
			t.Fatalf("setup: the provider was called (%d events)", n)
		}
		if logs := b.logs.String(); !strings.Contains(logs, "admission wait rejected") {
			t.Fatalf("setup: the worker was not turned away by admission; logs:\n%s", logs)
		}
		b.clock.Advance(61 * time.Second) // past the age budget: the first reconciler run must end it
		s := b.reconcile(t, b.sim)
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateCancelled {
			r, _ := b.l.GetReview(ctx, task.TaskID)
			var summary, uncertain string
			if r != nil {
				summary, uncertain = r.Summary, strings.Join(r.Uncertain, " | ")
			}
			t.Fatalf("cancelled before any provider call (the worker knew it), yet the task is %s (%s); review %q, uncertain: %s; reconciler %+v",
				got.State, got.ReviewReason, summary, uncertain, s)
		}
	})
}
