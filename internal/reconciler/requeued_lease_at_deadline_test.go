package reconciler_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestParkAfterRequeuedExpiredLeaseDoesNotClaimNothingWasGenerated: with a
// provider that deduplicates and reads back (the default simulated one), an
// expired lease with budget left is re-queued without a readback. The
// attempt's call had reached the provider, which generated a result. If no
// new attempt starts before the age deadline (the re-sent message waits in
// a backlog, or the consumers are down), the relay parks the queued task
// budget_exhausted. DESIGN §1.6: the review must say what is known and what
// is uncertain; the provider holds a result for the task's operation id, so
// "nothing was generated" is false, and an operator who believes it
// resolves the task as failed while its result exists.
func TestParkAfterRequeuedExpiredLeaseDoesNotClaimNothingWasGenerated(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "requeued-then-parked", func(n *ledger.NewTask) { n.MaxAge = 10 * time.Minute })
		deadline := time.UnixMilli(task.DeadlineMs)
		b.clock.Set(deadline.Add(-2 * time.Minute))
		claim(t, b, task.TaskID)
		// The worker's call reaches the provider, which generates; then the
		// worker vanishes before saving anything.
		b.prov.Script(task.TaskID, simulated.AcceptLoseReply)
		if _, err := b.prov.Generate(ctx, contract.Request{OperationID: task.TaskID, Attempt: 1, Kind: task.Kind, Input: json.RawMessage(task.Input)}); err == nil {
			t.Fatal("scripted accept_lose_reply returned no error")
		}
		if _, ok := b.prov.Record(task.TaskID); !ok {
			t.Fatal("the provider holds no record of the call")
		}

		b.clock.Set(deadline.Add(-time.Minute)) // lease expired 90 s ago, budget left
		if s := handle(t, b.handler()); s.Requeued != 1 {
			t.Fatalf("summary = %+v, want the expired lease re-queued", s)
		}
		e.DrainTaskIDs(t, e.Names.TaskQueueURL) // the re-sent message is not consumed in time

		b.clock.Set(deadline.Add(time.Minute))
		handle(t, b.handler())
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview {
			t.Fatalf("task %s, want needs_review past its age deadline", got.State)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range append([]string{r.Summary}, r.Known...) {
			if strings.Contains(k, "nothing was generated") {
				t.Fatalf("review (%s) states %q, but the provider generated a result for operation %s (readback would find it)",
					r.Reason, k, task.TaskID)
			}
		}
	})
}
