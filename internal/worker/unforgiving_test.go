package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// loseReply points the worker's ledger at a client that loses the reply of
// the n-th UpdateItem of the task (1: the claim, 2: the write that settles
// the attempt), after DynamoDB applied it.
func (b *bundle) loseReply(t *testing.T, taskID string, n int) *faultinject.Injector {
	t.Helper()
	inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
		if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == taskID && c.N == n {
			return faultinject.LostReply
		}
		return ""
	}))
	cfg := b.e.AWS.Copy()
	cfg.APIOptions = append(cfg.APIOptions, inj.Register)
	l, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
	if err != nil {
		t.Fatal(err)
	}
	b.h.Ledger = l
	return inj
}

// TestClaimReplyLost: a claim that DynamoDB applied but whose reply was lost
// is this worker's claim: the provider is called once, the task completes,
// nothing is parked — with a provider that does not honour idempotency keys.
func TestClaimReplyLost(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "claim-lost", prompt)
		inj := b.loseReply(t, task.TaskID, 1)
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		if inj.Total(faultinject.LostReply) != 1 {
			t.Fatal("the claim's reply was not lost")
		}
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		if c := b.sim.Calls(task.TaskID); c != 1 {
			t.Fatalf("provider calls %d, want exactly 1", c)
		}
		if got.Attempts != 1 || got.AssignmentVersion != 1 {
			t.Fatalf("attempts %d version %d, want 1 and 1", got.Attempts, got.AssignmentVersion)
		}
		if _, err := b.l.GetReview(ctx, task.TaskID); err == nil {
			t.Fatal("a review item was written for a task that completed")
		}
	})
}

// TestCompleteReplyLost: the result was saved although the reply was lost:
// outcome completed, saved once, no "result discarded".
func TestCompleteReplyLost(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true}))
		ctx := context.Background()
		task := b.create(t, "complete-lost", prompt)
		inj := b.loseReply(t, task.TaskID, 2)
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		if inj.Total(faultinject.LostReply) != 1 {
			t.Fatal("the completion's reply was not lost")
		}
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		rec, _ := b.sim.Record(task.TaskID)
		if got.Result != string(rec.Result.Output) || b.sim.SideEffects(task.TaskID) != 1 {
			t.Fatalf("result %q (provider %q), side effects %d", got.Result, rec.Result.Output, b.sim.SideEffects(task.TaskID))
		}
		logs := b.logs.String()
		if strings.Contains(logs, "result discarded") || !strings.Contains(logs, `"msg":"completed"`) {
			t.Fatalf("logs say the saved result was discarded, or never say completed:\n%s", logs)
		}
		if sum(emf(t, b), "Completed") != 1 {
			t.Errorf("Completed metric: %v", emf(t, b))
		}
	})
}

// TestScheduleRetryReplyLost: the retry was scheduled although the reply
// was lost: the record is reported as a batch item failure with the
// backoff as its visibility, not acknowledged.
func TestScheduleRetryReplyLost(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{ThrottleRetryAfter: 2 * time.Second}))
		ctx := context.Background()
		task := b.create(t, "retry-lost", prompt)
		b.sim.Script(task.TaskID, simulated.Throttle)
		inj := b.loseReply(t, task.TaskID, 2)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
		if inj.Total(faultinject.LostReply) != 1 {
			t.Fatal("the schedule-retry reply was not lost")
		}
		wantState(t, b.get(t, task.TaskID), ledger.StateRetryWait)
		if calls := b.sqs.Calls(); len(calls) != 1 || calls[0].secs != 2 {
			t.Fatalf("visibility changes %v, want one to the 2s backoff", calls)
		}
	})
}

// bigProvider succeeds with a result of size bytes.
type bigProvider struct {
	size  int
	calls atomic.Int32
}

func (p *bigProvider) Name() string { return "big" }
func (p *bigProvider) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	p.calls.Add(1)
	return contract.Result{Output: []byte(`{"text":"` + strings.Repeat("w", p.size) + `"}`), Provider: "big", ProviderRef: "big-ref-1"}, nil
}

// TestOversizedResultParked: a result that cannot fit the item is parked
// result_too_large, deterministically, with what is known; never unknown.
func TestOversizedResultParked(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		p := &bigProvider{size: itemsize.MaxItemBytes}
		b.h.Provider = p
		ctx := context.Background()
		task := b.create(t, "too-big", prompt)
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateNeedsReview)
		if got.Result != "" || p.calls.Load() != 1 {
			t.Fatalf("result saved (%d bytes) or provider calls %d != 1", len(got.Result), p.calls.Load())
		}
		r := mustReview(t, b, task.TaskID)
		if r.Reason != ledger.ReviewResultTooLarge || r.ProviderRef != "big-ref-1" {
			t.Fatalf("review %+v, want result_too_large with the provider ref", r)
		}
		for _, want := range []string{"the call succeeded", "big-ref-1", "409600", "not saved", "DESIGN §12"} {
			if !containsAny(append(append([]string{r.Summary}, r.Known...), r.Uncertain...), want) {
				t.Errorf("review lacks %q: %+v", want, r)
			}
		}
		if strings.Contains(b.logs.String(), strings.Repeat("w", 100)) {
			t.Error("the result reached the logs")
		}
	})
}

// TestExpiredLastAttemptLeftToTheReconciler: a duplicate message finding
// the last attempt's lease expired, with a provider that does not honour
// idempotency keys, acknowledges without parking: the provider may have
// acted and may have a readback, which only the reconciler tries.
func TestExpiredLastAttemptLeftToTheReconciler(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true}))
		ctx := context.Background()
		task := b.create(t, "expired-last", prompt, func(n *ledger.NewTask) { n.MaxAttempts = 1 })
		if _, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "vanished", Lease: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateRunning)
		if _, err := b.l.GetReview(ctx, task.TaskID); err == nil {
			t.Fatal("parked budget_exhausted without a readback")
		}
		if b.sim.Calls(task.TaskID) != 0 {
			t.Fatal("the provider was called")
		}
	})
}

// TestLapsedWorkerSavesItsResultFromUnknown: the reconciler expired the
// lease of a worker that was slow but alive (running → unknown at the same
// version); when its provider call returns, its fenced Complete still
// saves the result, and the provider is called once.
func TestLapsedWorkerSavesItsResultFromUnknown(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g // the default 30 s lease: no renewal during the test
		task := b.create(t, "lapsed", prompt)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		done := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); done <- resp }()
		g.waitStarted(t)

		b.clock.Advance(time.Minute)
		claimed := b.get(t, task.TaskID)
		if _, err := b.l.ExpireToUnknown(ctx, task.TaskID, claimed.AssignmentVersion); err != nil {
			t.Fatalf("the reconciler's ExpireToUnknown: %v", err)
		}
		close(g.release)
		wantNoFailures(t, await(t, done))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		rec, _ := b.sim.Record(task.TaskID)
		if got.Result != string(rec.Result.Output) || got.AssignmentVersion != claimed.AssignmentVersion || b.sim.SideEffects(task.TaskID) != 1 {
			t.Fatalf("result saved %v, version %d (claimed %d), side effects %d", got.Result == string(rec.Result.Output), got.AssignmentVersion, claimed.AssignmentVersion, b.sim.SideEffects(task.TaskID))
		}
	})
}

// TestParkThrottledIsRepeatedNotDeferred: the provider returned a result too
// large for the item; the park that records it is throttled twice. The
// worker is the only one that knows the call succeeded: deferring the
// message would let the lease lapse into "unknown" and a false
// unknown_outcome review (the soak's oversized_result in plain mode found
// this). The park is repeated in-process and lands result_too_large.
func TestParkThrottledIsRepeatedNotDeferred(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		p := &bigProvider{size: itemsize.MaxItemBytes}
		ctx := context.Background()
		task := b.create(t, "too-big-throttled", prompt)
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.TransactWriteItems" && c.TaskID == task.TaskID && c.N <= 2 {
				return faultinject.Throttle
			}
			return ""
		})
		b.h.Provider = p
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		if n := inj.Total(faultinject.Throttle); n != 2 {
			t.Fatalf("%d park sends throttled, want 2", n)
		}
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateNeedsReview)
		if r := mustReview(t, b, task.TaskID); r.Reason != ledger.ReviewResultTooLarge || p.calls.Load() != 1 {
			t.Fatalf("review %q after %d provider calls, want result_too_large after 1", r.Reason, p.calls.Load())
		}
	})
}
