package worker_test

// What the worker does when its own DynamoDB writes
// keep failing (the follow-ups of settle_under_write_faults_test.go), on kumo and moto
// with a Bedrock-like provider (no idempotency, no readback).

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestUnconfirmedClaimIsReleasedByItsOwner: the claim is applied, its
// reply is lost and every read that would recognise it is throttled. The
// worker gives the claim back (conditioned on its own lease owner), so the
// task is queued again with its attempt returned and no provider call; the
// redelivery then runs it to completion with one generation.
func TestUnconfirmedClaimIsReleasedByItsOwner(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "claim-unconfirmed", prompt)
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			switch {
			case c.TaskID != task.TaskID:
			case c.Key() == "DynamoDB.UpdateItem" && c.N == 1:
				return faultinject.LostReply
			case c.Key() == "DynamoDB.GetItem":
				return faultinject.Throttle
			}
			return ""
		})
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
		if inj.Total(faultinject.LostReply) != 1 || inj.Total(faultinject.Throttle) == 0 {
			t.Fatalf("faults injected: %+v", inj.Injected())
		}
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateQueued || got.Attempts != 0 || got.LeaseOwner != "" || b.sim.Calls(task.TaskID) != 0 {
			t.Fatalf("after an unconfirmed claim: state %s attempts %d owner %q provider calls %d; want queued, 0, no owner, no call",
				got.State, got.Attempts, got.LeaseOwner, b.sim.Calls(task.TaskID))
		}
		b.send(t, task.TaskID) // the deferred record comes back
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
		if n := b.sim.SideEffects(task.TaskID); n != 1 {
			t.Fatalf("side effects %d, want 1", n)
		}
	})
}

// TestCompletionThatKeepsFailingParksTheResultNotSaved: the provider acted
// and every Complete is throttled. The worker repeats it, then parks the
// task result_not_saved with the provider's reference: the operator learns
// the call succeeded, never "the provider may have acted".
func TestCompletionThatKeepsFailingParksTheResultNotSaved(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "complete-keeps-failing", prompt)
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == task.TaskID && c.N >= 3 { // 1: the claim, 2: the call-start mark
				return faultinject.Throttle
			}
			return ""
		})
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		if n := inj.Total(faultinject.Throttle); n < 2 {
			t.Fatalf("the completion was sent %d times; want it repeated", n)
		}
		got := b.get(t, task.TaskID)
		rec, ok := b.sim.Record(task.TaskID)
		if !ok || b.sim.SideEffects(task.TaskID) != 1 {
			t.Fatal("want exactly one generation")
		}
		r := mustReview(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || r.Reason != ledger.ReviewResultNotSaved || r.ProviderRef == "" || r.ProviderRef != rec.Result.ProviderRef {
			t.Fatalf("task %s, review %s with provider ref %q (provider's %q); want needs_review result_not_saved with the reference",
				got.State, r.Reason, r.ProviderRef, rec.Result.ProviderRef)
		}
	})
}

// TestRetryThatKeepsFailingIsRepeatedUntilScheduled: the provider answered
// 429 with Retry-After (it did not act) and the ScheduleRetry is throttled
// six times. The worker repeats the same write (same nonce) until it lands:
// retry_wait, the attempt counted, not_before honouring Retry-After — not a
// Release that would give back an attempt the provider was called for and
// drop not_before (a loop past max_attempts).
func TestRetryThatKeepsFailingIsRepeatedUntilScheduled(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true, ThrottleRetryAfter: 2 * time.Second}))
		ctx := context.Background()
		task := b.create(t, "retry-keeps-failing", prompt)
		b.sim.Script(task.TaskID, simulated.Throttle)
		var retries atomic.Int32
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == task.TaskID && c.N >= 3 { // 1: the claim, 2: the call-start mark
				if retries.Add(1) <= 6 { // the ScheduleRetry and its first five repeats
					return faultinject.Throttle
				}
			}
			return ""
		})
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
		if n := inj.Total(faultinject.Throttle); n != 6 {
			t.Fatalf("the retry write was throttled %d times, want 6", n)
		}
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateRetryWait || got.Attempts != 1 || b.sim.SideEffects(task.TaskID) != 0 ||
			got.NotBefore < b.clock.Now().Add(2*time.Second).UnixMilli() {
			t.Fatalf("after the 429 whose retry write kept failing: state %s attempts %d side effects %d not_before in %v; want retry_wait, 1, 0, >= 2s",
				got.State, got.Attempts, b.sim.SideEffects(task.TaskID), time.UnixMilli(got.NotBefore).Sub(b.clock.Now()))
		}
		b.clock.Advance(3 * time.Second)
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
	})
}
