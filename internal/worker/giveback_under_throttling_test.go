package worker_test

// The worker's give-backs (Release) after deadline admission, of an
// unconfirmed claim, and after a retry that could not be scheduled, with a
// Bedrock-like provider (no idempotency, no readback) and our own DynamoDB
// writes throttled (kumo and moto). Each comment tells how the scenario
// would break the promise; each test asserts that it holds.

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestReleaseAfterAdmissionThrottledIsRetriedNotParked: the claim is
// applied, then the invocation has too little time left for a call (the
// post-claim admission check), so the worker gives the claim back with
// Release — one UpdateItem, which DynamoDB throttles. Nothing repeats it:
// the task stays running under the worker's lease with no provider call
// behind it, the redelivery is acknowledged as "leased", the lease lapses
// and the reconciler (no readback) parks it unknown_outcome — false
// uncertainty, as from a claim whose lost reply goes unrecognised, reached
// by another road.
func TestReleaseAfterAdmissionThrottledIsRetriedNotParked(t *testing.T) {
	t.Parallel()
	const margin = 500 * time.Millisecond
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		task := b.create(t, "release-throttled", prompt)
		claimed := false
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.TaskID != task.TaskID || c.Key() != "DynamoDB.UpdateItem" {
				return ""
			}
			if !claimed { // the first UpdateItem is the claim
				claimed = true
				return ""
			}
			return faultinject.Throttle // every later write of the first invocation
		})
		b.h.DeadlineMargin = margin
		b.h.CallTimeout = 200 * time.Millisecond
		// The claim "eats the time" (the worker test's own device): pause
		// after it until the work context ends at the margin.
		b.h.Hooks = &worker.Hooks{AfterClaim: func(ctx context.Context, _ string) error { <-ctx.Done(); return nil }}
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		ctx, cancel := context.WithTimeout(context.Background(), margin+500*time.Millisecond)
		handle(t, b.h, ctx, ev)
		cancel()
		if inj.Total(faultinject.Throttle) == 0 {
			t.Fatalf("the release was not throttled: %+v", inj.Injected())
		}
		// A later invocation with time to spare, faults gone.
		b.h.Hooks = nil
		b.h.Ledger = b.l
		b.send(t, task.TaskID) // the record that came back
		handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
		got := b.settleAndWork(t, task.TaskID)

		calls := b.sim.Calls(task.TaskID)
		if got.State == ledger.StateCompleted && b.sim.SideEffects(task.TaskID) == 1 {
			return // recovered: the promise held
		}
		r, rerr := b.l.GetReview(context.Background(), task.TaskID)
		if calls == 0 && rerr == nil && r.Reason == ledger.ReviewUnknownOutcome {
			t.Fatalf("false uncertainty: a task given back before any provider call (calls %d) ended %s, review %s: uncertain %q",
				calls, got.State, r.Reason, r.Uncertain)
		}
		t.Fatalf("state %s, provider calls %d, review %+v (err %v)", got.State, calls, r, rerr)
	})
}

// TestRetryWriteFailuresKeepTheAttemptBudget: the provider answers
// 429 every time, and every ScheduleRetry of ours is throttled (a hot
// partition). Each delivery claims (attempt n), calls the provider, fails
// to schedule the retry, and Release gives the attempt back. The attempt
// counter never advances, so max_attempts (5) never stops the loop: the
// provider is called once per delivery until the age budget ends.
func TestRetryWriteFailuresKeepTheAttemptBudget(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true, ThrottleRetryAfter: time.Second}))
		task := b.create(t, "release-loop", prompt)
		if task.MaxAttempts != 5 {
			t.Fatalf("max_attempts %d, want the default 5", task.MaxAttempts)
		}
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.TaskID != task.TaskID || c.Key() != "DynamoDB.UpdateItem" {
				return ""
			}
			// Per delivery: claim, the call-start mark, then ScheduleRetry
			// and its five repeats (throttled), then Release (applied). 9
			// UpdateItems each.
			switch (c.N - 1) % 9 {
			case 0, 1, 8:
				return ""
			}
			return faultinject.Throttle
		})
		const deliveries = 6
		for i := range deliveries {
			b.sim.Script(task.TaskID, simulated.Throttle)
			b.send(t, task.TaskID)
			handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
			b.clock.Advance(2 * time.Second)
			if got := b.get(t, task.TaskID); !got.State.Live() || got.State == ledger.StateRunning {
				t.Logf("delivery %d: state %s attempts %d", i+1, got.State, got.Attempts)
				break
			}
		}
		got := b.get(t, task.TaskID)
		calls := b.sim.Calls(task.TaskID)
		t.Logf("throttles %d, provider calls %d, state %s, attempts %d", inj.Total(faultinject.Throttle), calls, got.State, got.Attempts)
		if calls > got.MaxAttempts {
			t.Fatalf("attempt budget bypassed: %d provider calls for a task with max_attempts %d (state %s, attempts %d)",
				calls, got.MaxAttempts, got.State, got.Attempts)
		}
	})
}

// TestThrottledReleaseClaimIsRetriedNotParked: the claim is applied, its
// reply is lost and the reads that would recognise it are throttled
// (handled by ReleaseClaim) — and the ReleaseClaim UpdateItem is throttled
// too. Sent once and never repeated, the record would be deferred, the
// redelivery would meet the lost claim's live lease and be acknowledged,
// and the reconciler would park the task unknown_outcome although no
// provider call was ever made.
func TestThrottledReleaseClaimIsRetriedNotParked(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		task := b.create(t, "releaseclaim-throttled", prompt)
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			switch {
			case c.TaskID != task.TaskID:
			case c.Key() == "DynamoDB.UpdateItem" && c.N == 1:
				return faultinject.LostReply // the claim: applied, reply lost
			case c.Key() == "DynamoDB.UpdateItem":
				return faultinject.Throttle // ReleaseClaim
			case c.Key() == "DynamoDB.GetItem":
				return faultinject.Throttle // the nonce reads
			}
			return ""
		})
		b.send(t, task.TaskID)
		handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
		if inj.Total(faultinject.LostReply) != 1 || inj.Total(faultinject.Throttle) < 2 {
			t.Fatalf("faults injected: %+v", inj.Injected())
		}
		b.h.Ledger = b.l // the throttling passes
		b.send(t, task.TaskID)
		handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
		got := b.settleAndWork(t, task.TaskID)
		calls := b.sim.Calls(task.TaskID)
		if got.State == ledger.StateCompleted && b.sim.SideEffects(task.TaskID) == 1 {
			return
		}
		r, rerr := b.l.GetReview(context.Background(), task.TaskID)
		if calls == 0 && rerr == nil && r.Reason == ledger.ReviewUnknownOutcome {
			t.Fatalf("false uncertainty: no provider call, yet parked %s with uncertain %q", r.Reason, r.Uncertain)
		}
		t.Fatalf("state %s, provider calls %d, review %+v (err %v)", got.State, calls, r, rerr)
	})
}

// TestRetryWriteFailuresHonourRetryAfter: the provider answered 429
// with Retry-After 30 s; the ScheduleRetry that would record not_before is
// throttled through its repeats, and Release gives the task back as plain
// queued — without not_before. Only the one message's visibility carries
// the delay: any other copy of the message (the relay's re-send, a
// duplicate delivery) claims the task at once and calls the provider again
// inside its Retry-After window.
func TestRetryWriteFailuresHonourRetryAfter(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		const retryAfter = 30 * time.Second
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true, ThrottleRetryAfter: retryAfter}))
		task := b.create(t, "release-retry-after", prompt)
		b.sim.Script(task.TaskID, simulated.Throttle)
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.TaskID == task.TaskID && c.Key() == "DynamoDB.UpdateItem" && c.N >= 3 && c.N <= 8 {
				return faultinject.Throttle // the ScheduleRetry and its five repeats (1: the claim, 2: the call-start mark)
			}
			return ""
		})
		b.send(t, task.TaskID)
		b.send(t, task.TaskID) // a duplicate copy (at-least-once delivery, or the relay's re-send)
		ev := b.deliver(t, 1, 60)
		handle(t, b.h, context.Background(), ev)
		if inj.Total(faultinject.Throttle) != 6 {
			t.Fatalf("throttles %d, want 6", inj.Total(faultinject.Throttle))
		}
		first := b.sim.Calls(task.TaskID)
		b.clock.Advance(time.Second) // well inside Retry-After
		handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
		if n := b.sim.Calls(task.TaskID); n > first {
			t.Fatalf("the provider was called again 1 s after a 429 with Retry-After %v (calls %d → %d; state %s)",
				retryAfter, first, n, b.get(t, task.TaskID).State)
		}
	})
}

// settleAndWork lets the reconciler settle a lapsed lease and, when it
// re-queued the task (no call had started under the lease), lets a worker
// take the message it sent.
func (b *bundle) settleAndWork(t *testing.T, id string) *ledger.Task {
	t.Helper()
	got := b.settleByReconciler(t, id)
	if got.State == ledger.StateQueued {
		handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
		got = b.get(t, id)
	}
	return got
}
