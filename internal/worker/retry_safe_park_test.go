package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// DESIGN §14: a retry-safe generation is never parked saying the provider
// may have acted. Its first attempt's reply is lost and the worker retries
// it (error class unknown_outcome); then its budget runs out on each path
// that parks a task budget_exhausted: the reconciler's relay of a
// retry_wait task past its age deadline, the worker's claim refused past
// it, and the last attempt ending in a 503. The review's summary and its
// uncertainties (what a person is asked to weigh) name the policy, not a
// possible duplicate; its known facts may quote the stored error.
func TestRetrySafeBudgetParksDoNotClaimAPossibleDuplicate(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"relay", "claim", "last"} {
		t.Run(path, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}),
					withHandler(func(h *worker.Handler) { h.RetrySafeGeneration = true }))
				ctx := context.Background()
				task := b.create(t, "rs-park-"+path, prompt, func(n *ledger.NewTask) { n.MaxAttempts = 2 })
				b.sim.Script(task.TaskID, simulated.AcceptLoseReply, simulated.ServerError)
				b.send(t, task.TaskID)
				handle(t, b.h, ctx, b.deliver(t, 1, 60))
				got := b.get(t, task.TaskID)
				wantState(t, got, ledger.StateRetryWait)
				switch path {
				case "relay":
					b.clock.Advance(2 * time.Hour)
					rh := &reconciler.Handler{Ledger: b.l, Dispatch: &dispatch.Sender{SQS: b.e.SQS, QueueURL: b.e.Names.TaskQueueURL},
						Provider: b.sim, Log: logging.Discard(), RetrySafeGeneration: true}
					if _, err := rh.Handle(ctx, json.RawMessage(`{}`)); err != nil {
						t.Fatal(err)
					}
				case "claim":
					b.clock.Advance(2 * time.Hour)
					b.send(t, task.TaskID)
					handle(t, b.h, ctx, b.deliver(t, 1, 60))
				case "last":
					b.clock.Advance(time.Second)
					b.send(t, task.TaskID)
					handle(t, b.h, ctx, b.deliver(t, 1, 60))
				}
				got = b.get(t, task.TaskID)
				if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted {
					t.Fatalf("setup: task %s (%s), want needs_review budget_exhausted", got.State, got.ReviewReason)
				}
				r, err := b.l.GetReview(ctx, task.TaskID)
				if err != nil {
					t.Fatal(err)
				}
				text := r.Summary + "\n" + strings.Join(r.Uncertain, "\n")
				if strings.Contains(strings.ToLower(text), "may have") {
					t.Errorf("retry-safe generation parked saying the provider may have acted:\n%s", text)
				}
			})
		})
	}
}
