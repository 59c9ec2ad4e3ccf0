package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRefusalAfterTheLeaseLapsedIsRecorded: a slow but alive worker
// (Bedrock-like provider: no idempotency, no readback) whose lease the
// reconciler expired to unknown at its own version — "parked": and then
// parked unknown_outcome; the provider then refuses the call: it certainly
// did not act. What the worker learned settles the task, as a result would
// (Complete, CompleteLapsed): a 429 schedules the retry, a 400 fails it, a
// 429 on the last attempt parks it budget_exhausted, a credentials refusal
// parks it provider_config — from unknown (ScheduleRetry and Fail accept
// unknown at the caller's version; a park of the worker's own assignment
// is written from there) or from the park (RetryLapsed, FailLapsed, the
// review revised). Refused as "fenced", they would leave the reconciler to
// park the task saying the provider may have acted (and billed), with a
// duplicate call among the operator's actions and — for credentials —
// nothing said about what needs fixing. A 5xx is not such a refusal and is
// left to the reconciler.
func TestRefusalAfterTheLeaseLapsedIsRecorded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		fault       simulated.Fault
		maxAttempts int
		want        ledger.State
		class       string // the task's error class (unparked), or
		reason      string // its review reason (parked by the worker)
	}{
		{"throttle", simulated.Throttle, 0, ledger.StateRetryWait, "transient", ""},
		{"bad_request", simulated.BadRequest, 0, ledger.StateFailed, "permanent_input", ""},
		{"throttle_last_attempt", simulated.Throttle, 1, ledger.StateNeedsReview, "", ledger.ReviewBudgetExhausted},
		{"credentials", simulated.Credentials, 0, ledger.StateNeedsReview, "", ledger.ReviewProviderConfig},
		// A 5xx is no refusal in so many words (a gateway's 502 may follow
		// a generation): the uncertainty stays the reconciler's.
		{"server_error", simulated.ServerError, 0, ledger.StateUnknown, "unknown_outcome", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachParked(t, func(t *testing.T, parked bool) {
				testenv.Each(t, func(t *testing.T, e *testenv.Env) {
					b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
					ctx := context.Background()
					g := newGate(b.sim)
					b.h.Provider = g
					task := b.create(t, "lapsed-refusal-"+c.name, prompt, func(n *ledger.NewTask) {
						if c.maxAttempts > 0 {
							n.MaxAttempts = c.maxAttempts
						}
					})
					b.sim.Script(task.TaskID, c.fault)
					b.send(t, task.TaskID)
					ev := b.deliver(t, 1, 60)
					done := make(chan events.SQSEventResponse, 1)
					go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
					g.waitStarted(t)
					b.clock.Advance(time.Minute) // the lease and its grace are past
					if s := b.reconcile(t, b.sim); s.ExpiredToUnknown != 1 {
						t.Fatalf("setup: reconciler %+v; want the lease expired to unknown", s)
					}
					if parked {
						b.clock.Advance(2 * time.Minute)
						if s := b.reconcile(t, b.sim); s.Parked != 1 {
							t.Fatalf("setup: reconciler %+v; want the unknown task parked", s)
						}
					}
					close(g.release) // the provider refuses: it did not act
					await(t, done)
					if b.sim.SideEffects(task.TaskID) != 0 {
						t.Fatal("setup: the provider acted")
					}
					got := b.get(t, task.TaskID)
					var known string
					if r, _ := b.l.GetReview(ctx, task.TaskID); r != nil && r.ReviewStatus == ledger.ReviewOpen {
						known = strings.Join(r.Known, " | ")
					}
					want := c.want
					if parked && want == ledger.StateUnknown {
						want = ledger.StateNeedsReview // the park stays as it is
					}
					if got.State != want || (c.class != "" && got.ErrorClass != c.class) || got.ReviewReason != c.reason && c.reason != "" {
						t.Fatalf("the provider refused the call (%s: it did not act), yet the worker left the task %s (review %q, error %q %q); want %s %s%s; open review known: %s",
							c.fault, got.State, got.ReviewReason, got.ErrorClass, got.ErrorMessage, want, c.class, c.reason, known)
					}
				})
			})
		})
	}
}
