package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCrashAfterClaimIsRetriedNotParked: with a provider that neither
// honours idempotency keys nor offers a readback, a worker that dies after
// its claim and before its provider call (Hooks.AfterClaim) leaves no
// call-start mark. The reconciler re-queues the task instead of parking it
// unknown_outcome, and the next worker completes it with exactly one side
// effect at the provider.
func TestCrashAfterClaimIsRetriedNotParked(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "crash-after-claim", prompt)

		dying := b.handler(b.l, b.sim)
		dying.Hooks = &worker.Hooks{AfterClaim: func(context.Context, string) error { return errDie }}
		b.send(t, task.TaskID)
		handle(t, dying, ctx, b.deliver(t, 1, 60))
		claimed := b.get(t, task.TaskID)
		if claimed.State != ledger.StateRunning || claimed.CallStartedVersion == claimed.AssignmentVersion || b.sim.Calls(task.TaskID) != 0 {
			t.Fatalf("after the crash: state %s, call_started_version %d at version %d, provider calls %d; want running, unmarked, no call",
				claimed.State, claimed.CallStartedVersion, claimed.AssignmentVersion, b.sim.Calls(task.TaskID))
		}

		b.clock.Advance(time.Minute)
		s := b.reconcile(t, b.sim)
		if s.Requeued != 1 || s.ExpiredToUnknown != 0 || s.Parked != 0 {
			t.Fatalf("reconciler summary %+v; want the unmarked expired lease re-queued", s)
		}
		wantState(t, b.get(t, task.TaskID), ledger.StateQueued)

		// The reconciler's re-send reaches a healthy worker.
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		if n := b.sim.SideEffects(task.TaskID); n != 1 {
			t.Fatalf("provider side effects %d, want exactly 1", n)
		}
		if got.CallStartedVersion != got.AssignmentVersion || got.AssignmentVersion != claimed.AssignmentVersion+1 {
			t.Fatalf("completed task: call_started_version %d, version %d; want the second assignment (%d) marked",
				got.CallStartedVersion, got.AssignmentVersion, claimed.AssignmentVersion+1)
		}
		if _, err := b.l.GetReview(ctx, task.TaskID); err == nil {
			t.Fatal("a review item exists for a task that was never in doubt")
		}
	})
}

// TestCallMarkOnlyWhenTheCallIsNotDeduplicated: a provider that honours
// idempotency keys costs the happy path one claim and one completion (two
// UpdateItems); one that does not — with a readback or without — costs one
// more, the call-start mark (with a readback it tells the reconciler
// whether a "not found" could still be overtaken by a running call).
func TestCallMarkOnlyWhenTheCallIsNotDeduplicated(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		opts    simulated.Options
		updates int
	}{
		{"idempotent", simulated.Options{}, 2},
		{"readback", simulated.Options{NoIdempotency: true}, 3},
		{"plain", simulated.Options{NoIdempotency: true, NoReadback: true}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withSim(c.opts))
				ctx := context.Background()
				task := b.create(t, "mark-cost-"+c.name, prompt)
				b.send(t, task.TaskID)
				ev := b.deliver(t, 1, 60)
				e.Counter.Reset()
				wantNoFailures(t, handle(t, b.h, ctx, ev))
				calls := e.Counter.Calls()
				got := b.get(t, task.TaskID)
				wantState(t, got, ledger.StateCompleted)
				if n := calls["DynamoDB.UpdateItem"]; n != c.updates {
					t.Fatalf("UpdateItems %d, want %d", n, c.updates)
				}
				marked := got.CallStartedVersion == got.AssignmentVersion
				if marked != (c.updates == 3) {
					t.Fatalf("call_started_version %d at version %d: marked %v, want %v", got.CallStartedVersion, got.AssignmentVersion, marked, c.updates == 3)
				}
			})
		})
	}
}

// TestFencedCallMarkSkipsTheCall: another assignment takes the task between
// the claim and the call-start mark; the mark is fenced, the provider is not
// called and the record is acknowledged.
func TestFencedCallMarkSkipsTheCall(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "mark-fenced", prompt)
		b.h.Hooks = &worker.Hooks{AfterClaim: func(ctx context.Context, id string) error {
			cur, err := b.l.Get(ctx, id)
			if err != nil {
				return err
			}
			if _, err := b.l.Release(ctx, id, cur.AssignmentVersion); err != nil {
				return err
			}
			_, err = b.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "other", Lease: 30 * time.Second})
			return err
		}}
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		got := b.get(t, task.TaskID)
		if b.sim.Calls(task.TaskID) != 0 || got.LeaseOwner != "other" || got.CallStartedVersion != 0 {
			t.Fatalf("provider calls %d, owner %q, call_started_version %d; want no call and the other owner's claim untouched",
				b.sim.Calls(task.TaskID), got.LeaseOwner, got.CallStartedVersion)
		}
	})
}

// TestCallMarkThatKeepsFailingReleasesTheTask: every send of the mark is
// throttled; the worker repeats it, then releases the task and its attempt
// without calling the provider, and reports the record for redelivery,
// which completes it with one generation.
func TestCallMarkThatKeepsFailingReleasesTheTask(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "mark-keeps-failing", prompt)
		var marks atomic.Int32
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == task.TaskID && c.N >= 2 { // 1: the claim
				if marks.Add(1) <= 1+worker.SaveRepeats { // the mark and its repeats
					return faultinject.Throttle
				}
			}
			return ""
		})
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
		if n := inj.Total(faultinject.Throttle); n != 1+worker.SaveRepeats {
			t.Fatalf("the mark was throttled %d times, want %d", n, 1+worker.SaveRepeats)
		}
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateQueued || got.Attempts != 0 || b.sim.Calls(task.TaskID) != 0 {
			t.Fatalf("after the failing mark: state %s attempts %d provider calls %d; want queued, 0, no call",
				got.State, got.Attempts, b.sim.Calls(task.TaskID))
		}
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
		if n := b.sim.SideEffects(task.TaskID); n != 1 {
			t.Fatalf("side effects %d, want 1", n)
		}
	})
}
