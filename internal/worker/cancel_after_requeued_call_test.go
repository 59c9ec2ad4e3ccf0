package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCancelBeforeTheCallOfARequeuedAttemptKeepsTheEarlierCallsOutcome:
// docs/protocol.md — a cancel while running of an effect ends "cancelled
// when the call never started or a readback finds nothing ..., completed
// (cancel_too_late) when the reply was in hand, else parked"; DESIGN §1.4:
// an uncertain outcome is resolved by readback or parked. The provider
// honours idempotency keys and reads back (the simulated provider; not
// retry-safe), so an expired lease is re-queued, recording unknown_outcome
// (a deduplicating provider's call may have generated). Attempt 1's worker
// called the provider, which generated, then went silent; attempt 2's worker
// learns of a cancel before its own call and ends the task cancelled,
// "no call was made" — the worker knows only its own assignment. The
// provider did act (attempt 1's generation, readable back by the shared
// operation id), and the task's own record said so.
//
// Sequence: claim v1, provider generates (operation id = task id), lease
// expires, reconciler re-queues (unknown_outcome) and sends; the model's
// window fills; the worker claims v2, a cancel while running lands, the
// admission wait is refused by it (knowNoCall) → CancelUnknown → cancelled.
//
// Want: not cancelled as if the provider never acted — completed from the
// readback (cancel_too_late) or parked for a person.
func TestCancelBeforeTheCallOfARequeuedAttemptKeepsTheEarlierCallsOutcome(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e) // the simulated provider: idempotency keys and readback
		task := requeuedAfterAGeneration(t, b, "cancel-after-requeued-call", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		cancelAfterTheClaimInAFullWindow(t, b, task.TaskID)
		if n := b.sim.Calls(task.TaskID); n != 1 {
			t.Fatalf("setup: %d provider calls, want 1 (attempt 1's; attempt 2 never called)", n)
		}
		b.clock.Advance(11 * time.Minute) // past the age budget: whatever is open is decided now
		s := b.reconcile(t, b.sim)
		got := b.get(t, task.TaskID)
		if got.State == ledger.StateCancelled {
			t.Fatalf("the provider generated under attempt 1 (readable back by operation id %s), yet the task ended cancelled: %q (reconciler %+v)",
				task.TaskID, got.ErrorMessage, s)
		}
	})
}

// requeuedAfterAGeneration creates a task whose attempt 1 reached the
// provider, which generated (operation id = task id), and whose worker
// then stopped: the reconciler re-queued the expired lease, recording
// unknown_outcome (a deduplicating provider's call may have generated).
func requeuedAfterAGeneration(t *testing.T, b *bundle, key string, mods ...func(*ledger.NewTask)) *ledger.Task {
	t.Helper()
	ctx := context.Background()
	task := b.create(t, key, prompt, mods...)
	if _, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "worker-gone", Lease: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.sim.Generate(ctx, contract.Request{OperationID: task.TaskID, Attempt: 1, Kind: task.Kind, Input: json.RawMessage(task.Input)}); err != nil {
		t.Fatalf("setup: attempt 1's call: %v", err)
	}
	b.clock.Advance(40 * time.Second) // lease + grace over
	if s := b.reconcile(t, b.sim); s.Requeued != 1 {
		t.Fatalf("setup: reconciler %+v; want the expired lease re-queued", s)
	}
	if got := b.get(t, task.TaskID); got.State != ledger.StateQueued || got.ErrorClass != "unknown_outcome" {
		t.Fatalf("setup: task %s (%s); want queued, unknown_outcome", got.State, got.ErrorClass)
	}
	return task
}
