package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// generatesThenBusy is a deduplicating provider whose first call
// generates and whose reply is then lost (an uncertain outcome); every
// later call is answered 503 before it reaches the model.
type generatesThenBusy struct {
	inner *simulated.Provider
	calls atomic.Int32
}

func (p *generatesThenBusy) Name() string                { return p.inner.Name() }
func (p *generatesThenBusy) HonoursIdempotencyKey() bool { return p.inner.HonoursIdempotencyKey() }
func (p *generatesThenBusy) Model() string               { return p.inner.Model() }
func (p *generatesThenBusy) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	if p.calls.Add(1) > 1 {
		return contract.Result{}, retrypolicy.Retryable(errors.New("provider: 503 service unavailable"))
	}
	if _, err := p.inner.Generate(ctx, req); err != nil {
		return contract.Result{}, err
	}
	return contract.Result{}, retrypolicy.Uncertain(errors.New("provider: connection reset after the request was sent"))
}

// A deduplicating provider's attempt whose reply was lost is repeated
// under the same key, which collects what it generated — but when every
// repeat fails and the attempts run out, the budget park must still say
// that the first attempt may have reached the provider: its outcome was
// never learnt, and the generation it may have made (and billed) is
// there to be collected by a retry or shown as evidence.
func TestLostReplyRetriedUnderItsKeyStaysUncertainThroughTheBudgetPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e) // the simulated provider: idempotency keys and readback
		p := &generatesThenBusy{inner: b.sim}
		b.h.Provider = p
		ctx := context.Background()
		task := b.create(t, "dedup-lost-reply-budget", prompt, func(n *ledger.NewTask) { n.MaxAttempts = 3 })
		for attempt := 1; attempt <= 3; attempt++ {
			b.send(t, task.TaskID)
			handle(t, b.h, ctx, b.deliver(t, 1, 60))
			if got := b.get(t, task.TaskID); attempt < 3 && got.State != ledger.StateRetryWait {
				t.Fatalf("setup: after attempt %d the task is %s (%s); want retry_wait", attempt, got.State, got.ErrorClass)
			}
			b.clock.Advance(10 * time.Minute) // past any backoff
		}
		if n, fx := p.calls.Load(), b.sim.SideEffects(task.TaskID); n != 3 || fx != 1 {
			t.Fatalf("setup: %d calls and %d generations; want 3 calls, the first of which generated", n, fx)
		}
		got := b.get(t, task.TaskID)
		r, err := b.l.GetReview(ctx, task.TaskID)
		if got.State != ledger.StateNeedsReview || err != nil || r == nil || r.Reason != ledger.ReviewBudgetExhausted {
			t.Fatalf("setup: task %s (%s), review %+v, %v; want parked budget_exhausted", got.State, got.ErrorClass, r, err)
		}
		if !strings.Contains(r.Summary, "may have reached the provider") {
			t.Fatalf("attempt 1 generated behind its lost reply, yet the budget park does not say an attempt may have reached the provider:\n%s\n%s",
				r.Summary, strings.Join(r.Known, "\n"))
		}
	})
}
