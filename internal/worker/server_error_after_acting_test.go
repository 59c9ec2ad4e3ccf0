package worker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// actsThen502 is a provider behind a gateway: the model generates (and
// bills), then the gateway answers 502 — a transient error to the worker.
type actsThen502 struct{ inner *simulated.Provider }

func (p *actsThen502) Name() string                { return p.inner.Name() }
func (p *actsThen502) HonoursIdempotencyKey() bool { return p.inner.HonoursIdempotencyKey() }
func (p *actsThen502) Model() string               { return p.inner.Model() }
func (p *actsThen502) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	if _, err := p.inner.Generate(ctx, req); err != nil {
		return contract.Result{}, err
	}
	return contract.Result{}, retrypolicy.Retryable(errors.New("provider gateway: 502 bad gateway"))
}

// TestServerErrorAfterActingIsCharged: a 5xx that comes back after the
// request was sent (a 502/504 from a gateway in front of the model) does
// not say the model did not generate. With a provider that bills it, each
// such attempt is real spend, and the task retries up to max_attempts
// times; were it charged nothing, it would spend max_attempts calls while
// its chain budget shows zero, beyond the bound "no task or chain spends
// beyond its budget by more than one call's reservation". So usedBy charges
// a sent call that failed with a 5xx-class error (the safe side, like an
// unknown outcome), and only throttles (429), 4xx refusals and
// ErrRequestNotSent are charged zero. Here one attempt generated (a
// provider side effect) and the chain must record spend or a reservation.
func TestServerErrorAfterActingIsCharged(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		b.h.Provider = &actsThen502{inner: b.sim}
		withBudgets(t, b, e.DDB, nil)
		ctx := context.Background()
		task := b.create(t, "5xx-after-acting", budgetedPrompt, budget(10_000, nil))
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateRetryWait || b.sim.SideEffects(task.TaskID) != 1 {
			t.Fatalf("setup: state %s, side effects %d; want retry_wait after one generation", got.State, b.sim.SideEffects(task.TaskID))
		}
		s := spendState(t, b, spend.ChainKeyOf(task))
		if s.Spent.Tokens() == 0 && s.ReservedTokens == 0 {
			t.Fatalf("an attempt whose request was sent and generated (1 side effect) before a 502 is charged nothing: chain spent %d, reserved %d; %d such retries would spend %d calls beyond a budget that shows 0",
				s.Spent.Tokens(), s.ReservedTokens, got.MaxAttempts, got.MaxAttempts)
		}
	})
}
