package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCrashedAttemptsReservationIsSettled: a budgeted task's worker
// reserves the call's maximum (110 tokens), the provider generates (29
// tokens reported), and the worker dies before settling (AfterProvider).
// The reconciler resolves the attempt (the lease lapses, the task is
// re-queued, the next attempt completes and settles its OWN reservation).
// The crashed attempt's reservation must be settled too, by whoever ends
// the attempt the worker did not settle — else the chain keeps 110 tokens
// "reserved by attempts in flight" forever with no attempt in flight, each
// crash leaks a full reservation from the chain's budget, and later
// regenerates are parked budget_exhausted with a review that says to retry
// "once the reservations in flight have settled", which never happens.
func TestCrashedAttemptsReservationIsSettled(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e) // idempotent provider with readback
		withBudgets(t, b, e.DDB, nil)
		ctx := context.Background()
		task := b.create(t, "stale-reservation", budgetedPrompt, budget(10_000, nil))
		crashed := false
		b.h.Hooks = &worker.Hooks{AfterProvider: func(context.Context, string) error {
			if crashed {
				return nil
			}
			crashed = true
			return errors.New("worker died after the provider replied, before settling")
		}}
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if s := spendState(t, b, spend.ChainKeyOf(task)); s.ReservedTokens != reserveTokens {
			t.Fatalf("setup: chain reserved %d tokens after the crash, want %d", s.ReservedTokens, reserveTokens)
		}
		// The lease lapses; the reconciler re-queues the task (the
		// provider honours idempotency keys) and the next attempt
		// completes it, the provider answering from its record.
		b.clock.Advance(2 * time.Minute)
		b.reconcile(t, b.sim)
		if got := b.get(t, task.TaskID); got.State != ledger.StateQueued {
			t.Fatalf("setup: after the reconciler the task is %s, want queued", got.State)
		}
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		s := spendState(t, b, spend.ChainKeyOf(task))
		if s.ReservedTokens != 0 {
			t.Fatalf("the task is %s (no attempt in flight) but its chain still holds %d tokens reserved (spent %d): the crashed attempt's reservation is never settled",
				got.State, s.ReservedTokens, s.Spent.Tokens())
		}
	})
}
