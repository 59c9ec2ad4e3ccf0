package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A task the provider throttles once and then answers keeps both attempts
// in its history, from the worker's own writes: the first retried with its
// call start (the provider honours no idempotency keys, so the worker
// marks the call) and its end, the second completed — also when the first
// claim's reply was lost and recognised as the worker's own.
func TestWorkerRecordsRetriedAndCompletedAttempts(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{ThrottleRetryAfter: 2 * time.Second, NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "history", prompt)
		b.sim.Script(task.TaskID, simulated.Throttle)
		inj := b.loseReply(t, task.TaskID, 1)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		handle(t, b.h, ctx, ev)
		if inj.Total(faultinject.LostReply) != 1 {
			t.Fatal("the claim's reply was not lost")
		}
		wantState(t, b.get(t, task.TaskID), ledger.StateRetryWait)
		b.clock.Advance(3 * time.Second)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		h := got.History()
		if len(h) != 2 {
			t.Fatalf("history = %+v; want 2 attempts", h)
		}
		first, second := h[0], h[1]
		if first.Attempt != 1 || first.Outcome != ledger.OutcomeRetry || first.ErrorClass != "transient" ||
			first.ClaimedMs == 0 || first.CallStartedMs < first.ClaimedMs || first.EndedMs < first.CallStartedMs {
			t.Errorf("first attempt = %+v; want retry (transient) with its claim, call start and end in order", first)
		}
		if second.Attempt != 2 || second.Outcome != ledger.OutcomeCompleted || second.ClaimedMs <= first.EndedMs ||
			second.CallStartedMs < second.ClaimedMs || second.EndedMs != got.CompletedMs || second.ProviderRef != got.ProviderRef {
			t.Errorf("second attempt = %+v; want completed after the first, ended at completed_ms %d", second, got.CompletedMs)
		}
	})
}
