package reconciler_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRequeuedExpiredLeaseAtItsDeadlineIsDecidedByReadback: with a provider
// that deduplicates and reads back (the default simulated one), an expired
// lease with budget left is re-queued without a readback, its error saying
// the attempt's outcome is unknown. If no new attempt starts before the age
// deadline (the re-sent message waits in a backlog, or the consumers are
// down), the provider's readback decides what a park would leave open
// (DESIGN §1.6: say what is known): a result the attempt generated
// completes the task — a "failed" task that actually succeeded is what
// users are burned by —, and a provider with no record of it parks the
// task saying nothing was generated, not that the provider may have acted.
// A later attempt that ends with an error of its own (throttled: a retry)
// does not close the earlier attempt's question.
func TestRequeuedExpiredLeaseAtItsDeadlineIsDecidedByReadback(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		for _, c := range []struct{ generated, throttledAfter bool }{{true, false}, {false, false}, {true, true}} {
			generated := c.generated
			b := setup(t, e)
			task := create(t, b, fmt.Sprintf("requeued-at-deadline-%v-%v", generated, c.throttledAfter), func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
			deadline := time.UnixMilli(task.DeadlineMs)
			b.clock.Set(deadline.Add(-2 * time.Minute))
			claim(t, b, task.TaskID)
			if generated {
				// The worker's call reaches the provider, which generates;
				// then the worker vanishes before saving anything.
				b.prov.Script(task.TaskID, simulated.AcceptLoseReply)
				if _, err := b.prov.Generate(ctx, contract.Request{OperationID: task.TaskID, Attempt: 1, Kind: task.Kind, Input: json.RawMessage(task.Input)}); err == nil {
					t.Fatal("scripted accept_lose_reply returned no error")
				}
			} // else the worker vanished right after its claim

			b.clock.Set(deadline.Add(-time.Minute)) // lease expired 90 s ago, budget left
			if s := handle(t, b.handler()); s.Requeued != 1 {
				t.Fatalf("summary = %+v, want the expired lease re-queued", s)
			}
			e.DrainTaskIDs(t, e.Names.TaskQueueURL) // the re-sent message is not consumed in time
			if c.throttledAfter {
				a2 := claim(t, b, task.TaskID)
				if _, err := b.l.ScheduleRetry(ctx, task.TaskID, a2.AssignmentVersion, deadline.Add(-30*time.Second), "throttled", "429 from the provider"); err != nil {
					t.Fatal(err)
				}
			}

			b.clock.Set(deadline.Add(time.Minute))
			s := handle(t, b.handler())
			got := get(t, b, task.TaskID)
			if generated {
				if got.State != ledger.StateCompleted || got.ReadbackAt == "" || got.Result == "" {
					t.Fatalf("generated (then throttled: %v): task %s (readback_at %q; run %+v); want completed from the provider's readback",
						c.throttledAfter, got.State, got.ReadbackAt, s)
				}
				continue
			}
			if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted {
				t.Fatalf("no call: task %s (%s; run %+v); want needs_review, budget_exhausted", got.State, got.ReviewReason, s)
			}
			r, err := b.l.GetReview(ctx, task.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			claims := r.Summary + "\n" + strings.Join(r.Uncertain, "\n")
			if !strings.Contains(r.Summary, "nothing was generated") || strings.Contains(claims, "may have") {
				t.Fatalf("no call reached the provider, whose readback says so; the review says:\n%s\n%s", claims, strings.Join(r.Known, "\n"))
			}
		}
	})
}
