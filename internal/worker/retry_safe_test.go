package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// With a provider that neither deduplicates nor reads back (Bedrock), a
// retry-safe generation whose reply was lost is retried — the repeat costs
// only money — where an effect is left unknown for the reconciler and a
// person.
func TestLostReplyOfRetrySafeGenerationIsRetried(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		retrySafe bool
		want      ledger.State
	}{
		{"retry-safe", true, ledger.StateRetryWait},
		{"effect", false, ledger.StateUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}),
					withHandler(func(h *worker.Handler) { h.RetrySafeGeneration = c.retrySafe }))
				task := b.create(t, "lost-reply-"+c.name, prompt)
				b.sim.Script(task.TaskID, simulated.AcceptLoseReply)
				b.send(t, task.TaskID)
				handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
				got := b.get(t, task.TaskID)
				wantState(t, got, c.want)
				if got.CallStartedVersion == 0 {
					t.Errorf("no call-start mark: a reconciler that treats generation as an effect would read the call as never started")
				}
				if c.retrySafe && !strings.Contains(got.ErrorMessage, "retry-safe") {
					t.Errorf("error message %q does not say why the uncertain call is retried", got.ErrorMessage)
				}
			})
		})
	}
}

// A cancel while a retry-safe generation runs aborts the call and the
// fenced worker itself ends the task cancelled — no wait for the lease,
// the reconciler's settle time or a readback — where an effect's is left
// unknown for the reconciler.
func TestCancelOfRunningRetrySafeGenerationEndsCancelledByTheWorker(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		retrySafe bool
		want      ledger.State
	}{
		{"retry-safe", true, ledger.StateCancelled},
		{"effect", false, ledger.StateUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true, SlowDelay: 30 * time.Second}),
					withHandler(func(h *worker.Handler) { h.Lease = 300 * time.Millisecond; h.RetrySafeGeneration = c.retrySafe }))
				ctx := context.Background()
				task := b.create(t, "cancel-running-"+c.name, prompt)
				b.sim.Script(task.TaskID, simulated.Slow)
				b.send(t, task.TaskID)
				ev := b.deliver(t, 1, 60)
				done := make(chan events.SQSEventResponse, 1)
				go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
				awaitStarted(t, b.sim, task.TaskID)
				if _, err := b.l.CancelRunning(ctx, b.get(t, task.TaskID)); err != nil {
					t.Fatal(err)
				}
				wantNoFailures(t, await(t, done))
				got := b.get(t, task.TaskID)
				wantState(t, got, c.want)
				if got.Result != "" || b.sim.Starts(task.TaskID) != 1 {
					t.Fatalf("result %q, calls %d; want nothing saved and the one aborted call", got.Result, b.sim.Starts(task.TaskID))
				}
				if c.retrySafe && (got.ErrorClass != ledger.ErrorCancelledWhileRunning || !strings.Contains(got.ErrorMessage, "retry-safe")) {
					t.Fatalf("error %s: %q; want cancelled_while_running saying the retry-safe call was abandoned", got.ErrorClass, got.ErrorMessage)
				}
			})
		})
	}
}
