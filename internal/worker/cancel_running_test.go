package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// awaitStarted waits until the simulated provider saw a call for id.
func awaitStarted(t *testing.T, sim *simulated.Provider, id string) {
	t.Helper()
	deadline := time.Now().Add(hangBound)
	for sim.Starts(id) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the provider call did not start within %s", hangBound)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not synchronising on time
	}
}

// TestCancelWhileRunning: a task is cancelled (ledger.CancelRunning, as
// POST /tasks/{id}/cancel does) during a slow provider call. The worker's
// next renewal is refused, the call's context is cancelled (the provider
// records the call interrupted), nothing is saved, and the reconciler ends
// the task by the unknown rules: cancelled when the provider's readback
// finds nothing (idempotent, readback), parked unknown_outcome when the
// provider cannot be read back and the call had started (plain). Never a
// side effect, never a second call.
func TestCancelWhileRunning(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts simulated.Options
		want ledger.State
	}{
		{"idempotent", simulated.Options{}, ledger.StateCancelled},
		{"readback", simulated.Options{NoIdempotency: true}, ledger.StateCancelled},
		{"plain", simulated.Options{NoIdempotency: true, NoReadback: true}, ledger.StateNeedsReview},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				opts := c.opts
				opts.SlowDelay = 30 * time.Second
				b := setup(t, e, withSim(opts), withHandler(func(h *worker.Handler) { h.Lease = 300 * time.Millisecond }))
				ctx := context.Background()
				task := b.create(t, "cancel-running-"+c.name, prompt)
				b.sim.Script(task.TaskID, simulated.Slow)
				b.send(t, task.TaskID)
				ev := b.deliver(t, 1, 60)
				done := make(chan events.SQSEventResponse, 1)
				go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
				awaitStarted(t, b.sim, task.TaskID)

				read := b.get(t, task.TaskID)
				cancelled, err := b.l.CancelRunning(ctx, read)
				if err != nil {
					t.Fatal(err)
				}
				wantNoFailures(t, await(t, done))
				evs := b.sim.Events(task.TaskID)
				if len(evs) != 1 || evs[0].Outcome != simulated.OutcomeInterrupted {
					t.Fatalf("provider events %+v; want the one call interrupted by its cancelled context", evs)
				}
				if !strings.Contains(b.logs.String(), "heartbeat fenced; provider call cancelled") {
					t.Fatal("no log line says the heartbeat was fenced and the call cancelled")
				}
				got := b.get(t, task.TaskID)
				if got.State != ledger.StateUnknown || got.Result != "" || got.AssignmentVersion != cancelled.AssignmentVersion {
					t.Fatalf("after the fenced worker: state %s, result %q, version %d; want unknown, nothing saved, version %d untouched",
						got.State, got.Result, got.AssignmentVersion, cancelled.AssignmentVersion)
				}

				// The reconciler cannot tell a fenced worker whose call ended
				// from one whose renewals fail while its call runs on: it
				// waits for the fenced lease's end plus the call timeout (the
				// simulated provider's minute), then settles.
				b.clock.Advance(2 * time.Minute)
				s := b.reconcile(t, b.sim)
				final := b.get(t, task.TaskID)
				wantState(t, final, c.want)
				if final.Result != "" || b.sim.SideEffects(task.TaskID) != 0 || b.sim.Starts(task.TaskID) != 1 {
					t.Fatalf("final: result %q, side effects %d, calls %d; want no result, no effect, the one interrupted call",
						final.Result, b.sim.SideEffects(task.TaskID), b.sim.Starts(task.TaskID))
				}
				switch c.want {
				case ledger.StateCancelled:
					if s.Cancelled != 1 || s.ReadbackNotFound != 1 || final.ErrorClass != ledger.ErrorCancelledWhileRunning ||
						!strings.Contains(final.ErrorMessage, "readback found no record") {
						t.Fatalf("summary %+v, error %s: %q; want cancelled after a readback that found nothing", s, final.ErrorClass, final.ErrorMessage)
					}
				case ledger.StateNeedsReview:
					r, err := b.l.GetReview(ctx, task.TaskID)
					if err != nil {
						t.Fatal(err)
					}
					if r.Reason != ledger.ReviewUnknownOutcome || !strings.Contains(strings.Join(r.Known, "\n"), "was cancelled while running") ||
						!strings.Contains(r.Summary, "cancelled by its caller") || strings.Contains(strings.Join(r.SafeActions, "\n"), "review retry") ||
						!strings.Contains(strings.Join(r.Known, "\n"), "had been started") {
						t.Fatalf("review %s %q; want unknown_outcome saying the call had started and was cancelled", r.Reason, r.Known)
					}
				}
			})
		})
	}
}

// TestCancelBeforeTheCallStarts: with a provider whose calls are marked
// (plain), a cancel between the claim and the call fences the call-start
// mark, so the provider is never called, and the worker, which knows it,
// ends the task cancelled at once: nothing is left for the reconciler.
func TestCancelBeforeTheCallStarts(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "cancel-before-call", prompt)
		b.h.Hooks = &worker.Hooks{AfterClaim: func(ctx context.Context, id string) error {
			cur, err := b.l.Get(ctx, id)
			if err != nil {
				return err
			}
			_, err = b.l.CancelRunning(ctx, cur)
			return err
		}}
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		if n := b.sim.Starts(task.TaskID); n != 0 {
			t.Fatalf("provider calls %d after a cancel before the call, want 0", n)
		}
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCancelled)
		if !strings.Contains(got.ErrorMessage, "no call was made") {
			t.Fatalf("error %q; want cancelled as never called", got.ErrorMessage)
		}
		b.clock.Advance(2 * time.Minute) // past the fenced 30 s lease and the reconciler's settle time
		if s := b.reconcile(t, b.sim); s.Cancelled != 0 || s.Parked != 0 {
			t.Fatalf("summary %+v; want nothing left to the reconciler", s)
		}
		if _, err := b.l.GetReview(ctx, task.TaskID); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("review item: %v; want none for a task that was never in doubt", err)
		}
	})
}

// TestCancelAfterTheProviderActed: the cancel arrives while the provider
// has already performed the generation but the reply is lost on the way
// back (accept-then-lose-reply): the worker cannot save anything (fenced),
// and the reconciler's readback finds the one result and completes the
// task with it — the cancel came too late, and no second call is made.
func TestCancelAfterTheProviderActed(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true}))
		ctx := context.Background()
		task := b.create(t, "cancel-after-acted", prompt)
		b.sim.Script(task.TaskID, simulated.AcceptLoseReply)
		b.h.Hooks = &worker.Hooks{AfterProvider: func(ctx context.Context, id string) error {
			cur, err := b.l.Get(ctx, id)
			if err != nil {
				return err
			}
			if _, err := b.l.CancelRunning(ctx, cur); err != nil {
				t.Errorf("cancel after the provider acted: %v", err)
			}
			return nil
		}}
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if got := b.get(t, task.TaskID); got.State != ledger.StateUnknown || got.CancelVersion == 0 {
			t.Fatalf("after the cancel: state %s cancel_version %d; want unknown, cancelled (the worker's write fenced)", got.State, got.CancelVersion)
		}
		b.clock.Advance(2 * time.Minute) // past the fenced 30 s lease and the reconciler's settle time
		s := b.reconcile(t, b.sim)
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		if s.ReadbackFound != 1 || got.ReadbackAt == "" || b.sim.SideEffects(task.TaskID) != 1 || b.sim.Starts(task.TaskID) != 1 {
			t.Fatalf("summary %+v, readback_at %q, side effects %d, calls %d; want completed from the readback, one effect, one call",
				s, got.ReadbackAt, b.sim.SideEffects(task.TaskID), b.sim.Starts(task.TaskID))
		}
	})
}
