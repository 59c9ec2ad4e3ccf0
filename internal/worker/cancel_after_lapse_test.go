package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRefusalAfterLapseDoesNotUndoACancel: ScheduleRetry and Fail accept
// unknown at the caller's version. A lapsed task (unknown at v) that the
// caller then cancels is unknown too — CancelRunning accepts it — and the
// worker's refusal that follows must not revive it (retry_wait, a second
// call) nor end it failed over the cancel. It holds because the cancel
// bumps the version (unknown at v+1, cancel_version v): the worker's writes
// at v are fenced.
func TestRefusalAfterLapseDoesNotUndoACancel(t *testing.T) {
	t.Parallel()
	for _, fault := range []simulated.Fault{simulated.Throttle, simulated.BadRequest} {
		t.Run(string(fault), func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
				ctx := context.Background()
				g := newGate(b.sim)
				b.h.Provider = g
				task := b.create(t, "cancel-lapsed-"+string(fault), prompt)
				b.sim.Script(task.TaskID, fault)
				b.send(t, task.TaskID)
				ev := b.deliver(t, 1, 120)
				done := make(chan events.SQSEventResponse, 1)
				go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
				g.waitStarted(t)
				b.clock.Advance(time.Minute)
				if s := b.reconcile(t, b.sim); s.ExpiredToUnknown != 1 {
					t.Fatalf("setup: reconciler %+v; want the lease expired to unknown", s)
				}
				read := b.get(t, task.TaskID)
				if _, err := b.l.CancelRunning(ctx, read); err != nil {
					t.Fatalf("setup: cancel of the lapsed task: %v", err)
				}
				close(g.release)
				await(t, done)
				got := b.get(t, task.TaskID)
				if got.State == ledger.StateRetryWait || got.State == ledger.StateQueued || got.State == ledger.StateFailed {
					t.Fatalf("the caller cancelled the task, yet the fenced worker's %s moved it to %s (error %q)", fault, got.State, got.ErrorClass)
				}
				for range 3 {
					if got = b.get(t, task.TaskID); !got.State.Live() {
						break
					}
					b.clock.Advance(2 * time.Minute)
					b.reconcile(t, b.sim)
				}
				if got.State == ledger.StateQueued || got.State == ledger.StateRetryWait || got.State == ledger.StateRunning || b.sim.SideEffects(task.TaskID) != 0 {
					t.Fatalf("after a cancel the task is %s with %d side effects", got.State, b.sim.SideEffects(task.TaskID))
				}
			})
		})
	}
}
