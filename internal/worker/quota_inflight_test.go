package worker_test

// The per-caller daily quota around calls that were never made, calls in
// flight, and calls that can never fit (DESIGN §1, §13), on kumo and moto.

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// notSentOnce is the simulated provider whose first call never leaves the
// process: it waits (a connection pool, a credential fetch) until the call
// timeout ends it, and says so with retrypolicy.ErrRequestNotSent, as the
// Bedrock and OpenAI providers do. Later calls go through.
type notSentOnce struct {
	*simulated.Provider
	calls atomic.Int32
}

func (p *notSentOnce) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	if p.calls.Add(1) == 1 {
		<-ctx.Done()
		return contract.Result{}, retrypolicy.Retryable(fmt.Errorf("dial provider: %w: %w", retrypolicy.ErrRequestNotSent, context.Cause(ctx)))
	}
	return p.Provider.Generate(ctx, req)
}

// TestQuotaChargesNothingForACallCutBeforeItWasSent: a call the call
// timeout ended before it was sent is given back by the worker as never
// made (the attempt returns, the task runs again). Its quota reservation
// must be given back too: the provider billed nothing. Charged its full
// reservation instead, the caller's day pays for one real call twice —
// the phantom reservation and then the call that did run.
func TestQuotaChargesNothingForACallCutBeforeItWasSent(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		b.h.Provider = &notSentOnce{Provider: b.sim}
		b.h.CallTimeout = 300 * time.Millisecond
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 1_000_000})
		ctx := context.Background()
		task := b.create(t, "quota-not-sent", budgetedPrompt)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
		if got := b.get(t, task.TaskID); got.State != ledger.StateQueued || got.Attempts != 0 {
			t.Fatalf("after a call that was never sent: %s with %d attempts, want queued with the attempt given back", got.State, got.Attempts)
		}
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
		if n := b.sim.SideEffects(task.OperationID()); n != 1 {
			t.Fatalf("setup: %d generations, want 1", n)
		}
		used, err := s.Quotas.Used(ctx, task.Scope)
		if err != nil {
			t.Fatal(err)
		}
		if used != usedIn+usedOut {
			t.Fatalf("the caller's day is charged %d tokens for one call that used %d (and one that was never sent, reserving %d): the unsent call was charged its reservation",
				used, usedIn+usedOut, reserveTokens)
		}
	})
}

// TestQuotaReservationOfAFailedReserveIsGivenBackWhenNoCallIsMade: the
// quota's reservation write lands but its reply is lost, and the repeat is
// throttled, so Reserve fails; the worker makes no call and gives the task
// back. The caller then cancels the task. No call was ever made for it, yet
// its reservation stays on the caller's day — charged to the quota until
// the day ends (and shown as "reserved by calls in flight"): the worker
// knew the outcome of its reserve was uncertain and no call followed, and
// a Settle at nothing is conditional on the reservation, so it could give
// it back.
func TestQuotaReservationOfAFailedReserveIsGivenBackWhenNoCallIsMade(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		key := quotaKey(b, "anonymous")
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.TaskID != key || c.Key() != "DynamoDB.UpdateItem" {
				return ""
			}
			switch c.N {
			case 1:
				return faultinject.LostReply // applied: the reservation is held
			case 2:
				return faultinject.Throttle // Reserve's repeat: it fails
			}
			return "" // the store answers again: the give-back can land
		}))
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		quota := spend.Quota{Unit: spend.UnitTokens, Limit: 1_000_000}
		withBudgets(t, b, awsclient.DynamoDB(cfg), &quota)
		ctx := context.Background()
		task := b.create(t, "quota-reserve-uncertain", budgetedPrompt)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
		if inj.Total(faultinject.LostReply) != 1 {
			t.Fatal("setup: the quota reservation's reply was not lost")
		}
		if n := b.sim.Calls(task.OperationID()); n != 0 {
			t.Fatalf("setup: %d provider calls, want none", n)
		}
		if _, err := b.l.Cancel(ctx, task.TaskID); err != nil {
			t.Fatalf("cancel the queued task: %v", err)
		}
		wantState(t, b.get(t, task.TaskID), ledger.StateCancelled)
		clean, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: quota, Now: b.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		if used, err := clean.Used(ctx, "anonymous"); err != nil || used != 0 {
			t.Fatalf("the caller's day holds %d tokens (%v) for a task cancelled without any provider call, want 0", used, err)
		}
	})
}

// TestQuotaHeldByCallsInFlightDoesNotParkATaskThatFits: two calls of a
// caller hold 90 of its 100-token quota while they run (45 reserved each);
// a third task is refused a reservation meanwhile. Its refusal is only
// for now: the two calls settle at 12 tokens each, leaving 76 — room for
// it. Parked needs_review (budget_exhausted, "no room"), it waits for a
// person although nothing but timing stopped it; it should wait for the
// calls in flight (like admission, without an attempt) and then run.
func TestQuotaHeldByCallsInFlightDoesNotParkATaskThatFits(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		g := newGate(b.sim)
		b.h.Provider = g
		b.h.Concurrency = 2
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 100})
		ctx := context.Background()
		first := b.create(t, "quota-inflight-a", burstPrompt)
		second := b.create(t, "quota-inflight-b", burstPrompt)
		b.send(t, first.TaskID)
		b.send(t, second.TaskID)
		done := handleInBackground(t, b, ctx, b.deliver(t, 2, 60))
		g.waitStarted(t)
		g.waitStarted(t)

		third := b.create(t, "quota-inflight-c", burstPrompt)
		b.send(t, third.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		close(g.release)
		await(t, done)
		wantState(t, b.get(t, first.TaskID), ledger.StateCompleted)
		wantState(t, b.get(t, second.TaskID), ledger.StateCompleted)
		used, err := s.Quotas.Used(ctx, "anonymous")
		if err != nil {
			t.Fatal(err)
		}
		if used+burstReserve > 100 {
			t.Fatalf("setup: the day holds %d tokens after the two calls, no room for a third", used)
		}
		got := b.get(t, third.TaskID)
		if got.State == ledger.StateNeedsReview {
			t.Fatalf("task %s parked %s (%s: %s) while two calls in flight held the quota; they settled at %d of 100 tokens, leaving room for its %d: a passing contention was made an operator's problem",
				third.TaskID, got.ReviewReason, got.ErrorClass, got.ErrorMessage, used, burstReserve)
		}
		if n := b.sim.Calls(third.OperationID()); n != 0 {
			t.Fatalf("the third task called the provider %d times while the quota had no room", n)
		}
		// Once the calls in flight settled, it runs.
		b.clock.Advance(5 * time.Minute)
		b.send(t, third.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		wantState(t, b.get(t, third.TaskID), ledger.StateCompleted)
	})
}

// TestQuotaRefusalOfACallLargerThanTheQuotaDoesNotPromiseTheNextDay: a
// call whose own reservation (8,192 output tokens when max_tokens is
// unset) is larger than the caller's whole daily quota can never run
// under it, on any day. The review must not tell the operator that it
// will fit "after the quota frees (the next UTC day)": a retry tomorrow is
// refused the same way, and the task comes back to review.
func TestQuotaRefusalOfACallLargerThanTheQuotaDoesNotPromiseTheNextDay(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 1000})
		task := b.create(t, "quota-never-fits", prompt) // no max_tokens: 8,192 output tokens reserved
		b.run(t, task.TaskID)
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateNeedsReview)
		if n := b.sim.Calls(task.OperationID()); n != 0 {
			t.Fatalf("setup: %d provider calls, want none", n)
		}
		r, err := b.l.GetReview(context.Background(), task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		text := r.Summary + "\n" + strings.Join(r.SafeActions, "\n") + "\n" + strings.Join(r.Uncertain, "\n")
		if strings.Contains(text, "next UTC day") {
			t.Fatalf("the review of a call larger than the whole daily quota says it may run on the next UTC day, which refuses it the same way:\n%s", text)
		}
	})
}
