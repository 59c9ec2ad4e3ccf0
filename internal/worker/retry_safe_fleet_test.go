package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// While a deployment changes GENERATION_EFFECT_CLASS its two functions are
// updated one after the other: a retry-safe worker may meet a reconciler
// that still treats generation as an effect. The worker calls the provider
// and dies after the call; the effect reconciler must not read the call as
// never started — neither re-queue it blind (budget left) nor park it
// saying nothing was generated (budget gone). The retry-safe worker marks
// its calls for that reconciler.
func TestEffectReconcilerSeesTheCallOfARetrySafeWorker(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		maxAttempts int
	}{{"budget-left", 3}, {"last-attempt", 1}} {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}),
					withHandler(func(h *worker.Handler) {
						h.RetrySafeGeneration = true
						h.Hooks = &worker.Hooks{AfterProvider: func(context.Context, string) error { return errors.New("worker died after the call") }}
					}))
				task := b.create(t, "mixed-"+c.name, prompt, func(n *ledger.NewTask) { n.MaxAttempts = c.maxAttempts })
				b.send(t, task.TaskID)
				handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
				if n := b.sim.Starts(task.TaskID); n != 1 {
					t.Fatalf("setup: provider starts %d, want 1", n)
				}
				b.clock.Advance(2 * time.Minute)
				b.reconcile(t, b.sim) // RetrySafeGeneration=false: generation is an effect here
				got := b.get(t, task.TaskID)
				switch got.State {
				case ledger.StateQueued:
					t.Errorf("effect reconciler re-queued a generation whose provider call was made (no readback, no idempotency): a blind re-send; error %q", got.ErrorMessage)
				case ledger.StateNeedsReview:
					r, err := b.l.GetReview(context.Background(), task.TaskID)
					if err != nil {
						t.Fatal(err)
					}
					text := r.Summary + "\n" + strings.Join(r.Known, "\n")
					if strings.Contains(text, "no provider call was started") || strings.Contains(text, "nothing was generated") {
						t.Errorf("review claims no call while the provider was called once:\n%s", text)
					}
				}
			})
		})
	}
}
