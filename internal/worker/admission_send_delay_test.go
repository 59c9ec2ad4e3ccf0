package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// arrivals records when (on the test clock) each call reached the provider.
type arrivals struct {
	inner *simulated.Provider
	clock *testenv.Clock
	mu    sync.Mutex
	at    []time.Time
}

func (a *arrivals) Name() string                { return a.inner.Name() }
func (a *arrivals) HonoursIdempotencyKey() bool { return a.inner.HonoursIdempotencyKey() }
func (a *arrivals) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	a.mu.Lock()
	a.at = append(a.at, a.clock.Now())
	a.mu.Unlock()
	return a.inner.Generate(ctx, req)
}

// TestAdmittedCallSentLateStaysWithinTheRequestLimit: admission counts a
// call in the 5 s slot of its Admit, but the provider counts it when it
// arrives, and the worker does more between the two: the budget reservation
// and the call-start mark, each a settling write that save() repeats for up
// to ~9 s when DynamoDB throttles (the very moment a burst is on). Limit: 1
// request per minute. Call A is admitted at W+1 s (slot 0); its call-start
// mark is throttled four times (each throttle and its backoff modelled as
// 1.5 s), so A reaches the provider at W+7 s. Call B is due at W+65.5 s:
// slot 1 of the next window counts only the previous window's slots 1..11,
// so if A stayed counted in slot 0 alone, B would be admitted and the
// provider would see 2 calls 58.5 s apart — twice its limit in a rolling
// minute. The provider must never see more than the limit in any 60 s.
func TestAdmittedCallSentLateStaysWithinTheRequestLimit(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		w := time.Unix(b.clock.Now().Unix()/60*60+60, 0)
		b.clock.Set(w.Add(time.Second))
		rec := &arrivals{inner: b.sim, clock: b.clock}
		b.h.Provider = rec
		withAdmission(b, t, admission.Limit{RequestsPerWindow: 1, TokensPerWindow: 1_000_000})
		ctx := context.Background()
		a := b.create(t, "adm-a", prompt)
		second := b.create(t, "adm-b", prompt)

		var marks atomic.Int32
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			// UpdateItem 1 of A is its claim; 2..5 are its call-start mark.
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == a.TaskID && c.N >= 2 && c.N <= 5 {
				return faultinject.Throttle
			}
			return ""
		})
		inj.OnInject = func(faultinject.Call, faultinject.Kind) {
			marks.Add(1)
			b.clock.Advance(1500 * time.Millisecond)
		}
		b.send(t, a.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		wantState(t, b.get(t, a.TaskID), ledger.StateCompleted)
		if marks.Load() != 4 {
			t.Fatalf("setup: the call-start mark was throttled %d times, want 4", marks.Load())
		}

		b.clock.Set(w.Add(65500 * time.Millisecond))
		b.send(t, second.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))

		rec.mu.Lock()
		at := append([]time.Time(nil), rec.at...)
		rec.mu.Unlock()
		for i := range at {
			n := 0
			for _, o := range at[:i+1] {
				if at[i].Sub(o) < time.Minute {
					n++
				}
			}
			if n > 1 {
				t.Fatalf("the provider received %d calls in the 60 s ending W+%s (arrivals at %v after W); the limit is 1 per minute",
					n, at[i].Sub(w), offsets(at, w))
			}
		}
		if len(at) != 1 {
			t.Fatalf("setup: %d provider calls, want 1 (A) if B was correctly held back", len(at))
		}
	})
}

func offsets(at []time.Time, w time.Time) []time.Duration {
	out := make([]time.Duration, len(at))
	for i, x := range at {
		out[i] = x.Sub(w)
	}
	return out
}
