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

// TestRefusalAfterTheLeaseLapsedToUnknownIsRecorded: a slow but alive
// worker (Bedrock-like provider: no idempotency, no readback) whose lease
// the reconciler expired to unknown at its own version; the provider then
// refuses the call — it certainly did not act. ScheduleRetry and Fail are
// accepted from unknown at the caller's version (as Complete is), so what
// the worker learned settles the task: a 429 schedules the retry, a 400
// fails it. They were fenced on running, the worker acknowledged
// "fenced", and the task stayed unknown for the reconciler to park as "the
// provider may have acted" (adversarial review H's side observation).
func TestRefusalAfterTheLeaseLapsedToUnknownIsRecorded(t *testing.T) {
	for _, c := range []struct {
		fault simulated.Fault
		want  ledger.State
		class string
	}{
		{simulated.Throttle, ledger.StateRetryWait, "transient"},
		{simulated.BadRequest, ledger.StateFailed, "permanent_input"},
	} {
		t.Run(string(c.fault), func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
				g := newGate(b.sim)
				b.h.Provider = g
				task := b.create(t, "unknown-refusal-"+string(c.fault), prompt)
				b.sim.Script(task.TaskID, c.fault)
				b.send(t, task.TaskID)
				ev := b.deliver(t, 1, 60)
				done := make(chan events.SQSEventResponse, 1)
				go func() { resp, _ := b.h.Handle(context.Background(), ev); done <- resp }()
				g.waitStarted(t)
				b.clock.Advance(time.Minute) // the lease and its grace are past
				if s := b.reconcile(t, b.sim); s.ExpiredToUnknown != 1 {
					t.Fatalf("setup: reconciler %+v; want the lease expired to unknown", s)
				}
				if cur := b.get(t, task.TaskID); cur.State != ledger.StateUnknown {
					t.Fatalf("setup: the task is %s, want unknown", cur.State)
				}
				close(g.release)
				await(t, done)
				got := b.get(t, task.TaskID)
				if b.sim.SideEffects(task.TaskID) != 0 {
					t.Fatal("setup: the provider acted")
				}
				if got.State != c.want || got.ErrorClass != c.class {
					t.Fatalf("the provider refused the call (%s: it did not act), yet the task is %s with error %q %q; want %s, %q",
						c.fault, got.State, got.ErrorClass, got.ErrorMessage, c.want, c.class)
				}
			})
		})
	}
}
