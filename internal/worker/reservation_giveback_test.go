package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestQuotaHoldOfACrashedAttemptIsSettledByTheNextAttempt: a worker
// reserves a call on its caller's daily quota, the provider generates, and
// the worker dies before settling. The task's next attempt settles that
// reservation in full (the provider may have billed it) before reserving
// its own, as it does on budgets: the crashed attempt's hold becomes the
// day's usage. Left reserved, it held the quota as a call in flight all
// day, and every other task of the caller it kept out would wait for a
// call that never settles.
func TestQuotaHoldOfACrashedAttemptIsSettledByTheNextAttempt(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e) // idempotent provider with readback
		const limit = 1_000_000
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: limit})
		ctx := context.Background()
		task := b.create(t, "quota-crashed-hold", budgetedPrompt)
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
		if used, err := s.Quotas.Used(ctx, task.Scope); err != nil || used != reserveTokens {
			t.Fatalf("setup: the day holds %d tokens (%v) after the crash, want the reservation %d", used, err, reserveTokens)
		}
		// The lease lapses; the reconciler re-queues the task and the next
		// attempt completes it.
		b.clock.Advance(2 * time.Minute)
		b.reconcile(t, b.sim)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)

		// What the day holds, read from a refused reservation of the whole
		// quota (nothing is written).
		var qe *spend.QuotaExceededError
		if _, err := s.Quotas.Reserve(ctx, task.Scope, spend.Reservation{ID: "t_probe.a1", Tokens: limit}); !errors.As(err, &qe) {
			t.Fatalf("probe: %v", err)
		}
		if qe.Reserved != 0 || qe.Used != reserveTokens+usedIn+usedOut {
			t.Fatalf("the task is completed with no call in flight, yet the day holds %d tokens reserved (of %d used); want none reserved, the crashed attempt's %d and the next call's %d settled",
				qe.Reserved, qe.Used, reserveTokens, usedIn+usedOut)
		}
	})
}

// TestBudgetReservationOfAFailedReserveIsGivenBack: the chain budget's
// reservation write lands but its reply is lost, and its repeat is
// throttled, so the reserve fails; no call is made and the task is given
// back. The reservation is given back too (settled at nothing, if it is
// held), so a task cancelled before its next attempt leaves nothing
// reserved on its chain's budget.
func TestBudgetReservationOfAFailedReserveIsGivenBack(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := b.create(t, "budget-reserve-uncertain", budgetedPrompt, budget(10_000, nil))
		key := spend.BudgetItemKey(spend.ChainKeyOf(task))
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.TaskID != key || c.Key() != "DynamoDB.UpdateItem" {
				return ""
			}
			switch c.N {
			case 1:
				return faultinject.LostReply // applied: the reservation is held
			case 2:
				return faultinject.Throttle // the repeat: the reserve fails
			}
			return ""
		}))
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		withBudgets(t, b, awsclient.DynamoDB(cfg), nil)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
		if inj.Total(faultinject.LostReply) != 1 || b.sim.Calls(task.OperationID()) != 0 {
			t.Fatalf("setup: %d lost replies, %d provider calls; want 1 and none", inj.Total(faultinject.LostReply), b.sim.Calls(task.OperationID()))
		}
		if _, err := b.l.Cancel(ctx, task.TaskID); err != nil {
			t.Fatalf("cancel the queued task: %v", err)
		}
		if s := spendState(t, b, spend.ChainKeyOf(task)); s.ReservedTokens != 0 || s.Spent.Tokens() != 0 {
			t.Fatalf("the chain holds %d tokens reserved and %d spent for a task cancelled without any provider call, want none", s.ReservedTokens, s.Spent.Tokens())
		}
	})
}
