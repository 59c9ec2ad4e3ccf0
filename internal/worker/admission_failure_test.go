package worker_test

import (
	"context"
	"testing"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestAdmissionErrorGivesTheTaskAndItsMessageBackAtOnce: when the
// admission write itself fails (its window item throttled), no call is
// made and the task is released with its attempt, as every other no-call
// path after the claim does — and its message is made visible again at
// once, as theirs is. Left hidden for the rest of its visibility timeout
// (15 min deployed), the queued task would wait for the reconciler's
// re-send, one SendMessage more, though a worker could take it now.
func TestAdmissionErrorGivesTheTaskAndItsMessageBackAtOnce(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := b.create(t, "admission-error", prompt)
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if admission.IsWindowKey(c.TaskID) && c.Key() == "DynamoDB.UpdateItem" {
				return faultinject.Throttle
			}
			return ""
		}))
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		withAdmissionOn(b, t, awsclient.DynamoDB(cfg), admission.Limit{RequestsPerWindow: 100, TokensPerWindow: 10_000_000})

		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 600)
		wantFailures(t, handle(t, b.h, context.Background(), ev), ev.Records[0].MessageId)
		if inj.Total(faultinject.Throttle) == 0 {
			t.Fatalf("setup: the admission write was not throttled: %+v", inj.Injected())
		}
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateQueued || got.Attempts != 0 || b.sim.Calls(task.TaskID) != 0 {
			t.Fatalf("task %s with %d attempts and %d provider calls; want queued, the attempt given back, no call", got.State, got.Attempts, b.sim.Calls(task.TaskID))
		}
		calls := b.sqs.Calls()
		if len(calls) != 1 || calls[0].receipt != ev.Records[0].ReceiptHandle || calls[0].secs != 0 {
			t.Fatalf("visibility changes %v; want the message made visible again at once (one change to 0 s)", calls)
		}
	})
}
