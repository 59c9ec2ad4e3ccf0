package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestOperatorRetryDoesNotReuseTheHeldReservation: an operator retry of a
// parked budgeted task keeps its budget records, so the retried run sees
// what the chain spent. A budget of 150 tokens, a call reserving 110 (and
// using 29). The worker reserves 110 on the chain, calls the provider
// (billed), and dies before settling; the reconciler parks the task
// unknown_outcome (no idempotency, no readback) with the 110 still reserved
// on the chain. An operator retries it (opsapi.Apply, Keep finds the
// records). The retry resets attempts to 0, so the re-run's attempt is
// attempt 1 again; its reservation must not be taken for the dead
// attempt's ("a lost reply / redelivery"), or Reserve would succeed without
// checking the room — 40 tokens left, 110 needed — the provider would be
// called again, and the settle would replace the dead call's reservation
// with the new call's usage: one call counted for two billed.
func TestOperatorRetryDoesNotReuseTheHeldReservation(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		sp := withBudgets(t, b, e.DDB, nil)
		task := b.create(t, "retry-rsv", budgetedPrompt, budget(150, nil))
		chain := spend.ChainKeyOf(task)

		dieAfterBilledCall(t, b, task.TaskID)
		if s := spendState(t, b, chain); s.ReservedTokens != reserveTokens {
			t.Fatalf("setup: chain reserved %d tokens, want the dead attempt's %d", s.ReservedTokens, reserveTokens)
		}

		parked := b.get(t, task.TaskID)
		if parked.State != ledger.StateNeedsReview || parked.ReviewReason != ledger.ReviewUnknownOutcome {
			t.Fatalf("setup: %s %q, want needs_review unknown_outcome", parked.State, parked.ReviewReason)
		}

		retry := ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops@example.com", Note: "re-send it"}
		if _, err := opsapi.Apply(ctx, b.l, nil, sp.Budgets, task.TaskID, retry); err != nil {
			t.Fatalf("operator retry: %v", err)
		}
		before := spendState(t, b, chain)
		b.run(t, task.TaskID)

		got := b.get(t, task.TaskID)
		after := spendState(t, b, chain)
		calls := b.sim.Calls(task.TaskID)
		if calls > 1 {
			t.Fatalf("after the operator retry the provider was called again (%d calls, each billed %d tokens) though the chain held %d of its 150 tokens for the dead call (40 left, a call needs %d); the chain's record now says spent %d, reserved %d — one call counted for %d billed (task %s %q)",
				calls, usedIn+usedOut, before.ReservedTokens, reserveTokens, after.Spent.Tokens(), after.ReservedTokens, calls, got.State, got.ReviewReason)
		}
	})
}

// dieAfterBilledCall runs id's first attempt to the provider (which bills
// it) and kills the worker right after the call, then lets the reconciler
// expire the lease to unknown and park it (no readback): the task ends
// needs_review unknown_outcome with its reservation held on its records.
func dieAfterBilledCall(t *testing.T, b *bundle, id string) {
	t.Helper()
	ctx := context.Background()
	b.h.Hooks = &worker.Hooks{AfterProvider: func(context.Context, string) error { return errDie }}
	b.send(t, id)
	handle(t, b.h, ctx, b.deliver(t, 1, 60))
	b.h.Hooks = nil
	if n := b.sim.Calls(id); n != 1 {
		t.Fatalf("setup: %d provider calls, want 1", n)
	}
	rc := &reconciler.Handler{
		Ledger:   b.l,
		Dispatch: &dispatch.Sender{SQS: b.e.SQS, QueueURL: b.e.Names.TaskQueueURL},
		Provider: b.sim,
		Log:      logging.Discard(),
	}
	for range 2 { // lease expired → unknown; Settle later → parked
		b.clock.Advance(time.Minute)
		if _, err := rc.Handle(ctx, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if p := b.get(t, id); p.State != ledger.StateNeedsReview || p.ReviewReason != ledger.ReviewUnknownOutcome {
		t.Fatalf("setup: %s %q, want needs_review unknown_outcome", p.State, p.ReviewReason)
	}
}
