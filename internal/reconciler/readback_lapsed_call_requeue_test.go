package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestReadbackNotFoundDuringALapsedCallDoesNotRequeue: a worker whose
// renewals fail keeps its call running after the lease lapsed
// (heartbeat.go), for up to the call timeout (2 min by default, against a
// 30 s lease, 5 s grace and 30 s Settle). With a provider that ignores
// idempotency keys but reads back (the soak's plain+readback mode), the
// reconciler expires the lease to unknown, waits Settle, and reads back
// while the call is still in flight: "not found". Re-queuing then would
// have the next worker call the provider again while the first call is
// still generating — two generations for a non-idempotent provider, which
// promise 4 forbids (and which the soak's recall_after_uncertain would
// excuse, a lookup having answered not_found in between). "Not found" is
// credible only once no call of the expired assignment can still run
// (lease_until + the provider's call timeout).
func TestReadbackNotFoundDuringALapsedCallDoesNotRequeue(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, LongDelay: 8 * time.Second, CallTimeout: 2 * time.Minute})
		task := create(t, b, "inflight-requeue")
		markCall(t, b, claim(t, b, task.TaskID)) // lease 30 s; the worker marks the call it starts
		done := startLongCall(t, b, task)        // the lapsed worker's call, still running (bounded by its 2 min call timeout)
		defer func() { <-done }()
		b.clock.Advance(40 * time.Second) // lease + grace over: 10 s into the call's 2 min
		if s := handle(t, b.handler()); s.ExpiredToUnknown != 1 {
			t.Fatalf("first run: %+v, want the lease expired to unknown", s)
		}
		b.clock.Advance(35 * time.Second) // Settle over: 75 s into the call's 2 min
		s := handle(t, b.handler())
		got := get(t, b, task.TaskID)
		if s.Requeued > 0 || got.State == ledger.StateQueued {
			t.Fatalf("second run %+v: task %s — re-queued on a readback 'not found' made while the expired assignment's call (2 min timeout) was still in flight: the provider will generate twice",
				s, got.State)
		}
	})
}
