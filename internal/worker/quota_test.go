package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// burstPrompt reserves 2 + 32 input and 11 output tokens = 45 (the call's
// maximum); the simulated provider reports 1 input and 11 output tokens =
// 12. A 100-token quota holds two reservations at once, and eight calls'
// reported usage.
const (
	burstPrompt  = `{"prompt":"hi","max_tokens":11}`
	burstReserve = 45
	burstUsed    = 12
)

// inFlight is the simulated provider, counting the calls in progress at
// once (the in-flight term of the quota's bound).
type inFlight struct {
	*simulated.Provider
	mu        sync.Mutex
	now, peak int
}

func (p *inFlight) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	p.mu.Lock()
	p.now++
	p.peak = max(p.peak, p.now)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.now--
		p.mu.Unlock()
	}()
	return p.Provider.Generate(ctx, req)
}

func (p *inFlight) Peak() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// TestDailyQuotaBoundsABurstOfHeldTasks: 40 tasks of one caller (no
// budget: the quota is the caller's only limit) are recorded and queued
// while no worker runs, then one invocation takes them all at once. The
// caller's daily quota of 100 tokens is reserved before every call, so
// what the day is charged stays within the quota (plus, at most, one
// reservation per call in flight — zero here, since the provider reports
// less than it reserved), and the provider is called only as often as the
// quota has room for. A task refused while calls in flight hold the room
// waits for them (retry_wait, its attempt given back, no call) and is
// taken again; once the settled calls leave no room for another, every
// task left is parked budget_exhausted (error class quota_exceeded)
// without a call. Read only at submit, the quota let all 40 run: 480
// tokens charged against 100.
func TestDailyQuotaBoundsABurstOfHeldTasks(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		const n, quota = 40, 100
		b := setup(t, e, withSim(simulated.Options{Latency: 20 * time.Millisecond}))
		probe := &inFlight{Provider: b.sim}
		b.h.Provider = probe
		b.h.Concurrency = n
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: quota})
		ctx := context.Background()
		tasks := make([]*ledger.Task, n)
		for i := range tasks {
			tasks[i] = b.create(t, "quota-burst-"+string(rune('a'+i/26))+string(rune('a'+i%26)), burstPrompt)
			b.send(t, tasks[i].TaskID)
		}
		handle(t, b.h, ctx, b.deliver(t, n, 60))
		// The waiting tasks are taken again once their wait is over, until
		// none waits: each round, the calls of the last one have settled.
		waits := 0
		for round := 0; ; round++ {
			var waiting []string
			for _, task := range tasks {
				got := b.get(t, task.TaskID)
				if got.State != ledger.StateRetryWait {
					continue
				}
				if got.Attempts != 0 || b.sim.Calls(task.TaskID) != 0 {
					t.Fatalf("task %s waits for the quota with %d attempts and %d provider calls, want its attempt given back and no call", task.TaskID, got.Attempts, b.sim.Calls(task.TaskID))
				}
				waiting = append(waiting, task.TaskID)
			}
			if len(waiting) == 0 {
				break
			}
			if round == 20 {
				t.Fatalf("%d tasks still wait for the quota after %d rounds", len(waiting), round)
			}
			waits += len(waiting)
			// Past the longest wait (QuotaWaitMax and as much again of
			// jitter): every waiting task is due again each round.
			b.clock.Advance(2 * worker.QuotaWaitMax)
			for _, id := range waiting {
				b.send(t, id)
			}
			handle(t, b.h, ctx, b.deliverFor(t, waiting, 60))
		}
		if waits == 0 {
			t.Fatal("no task waited for the calls in flight: setup (40 tasks at once under a quota holding two reservations)")
		}

		calls, completed := 0, 0
		for _, task := range tasks {
			got := b.get(t, task.TaskID)
			c := b.sim.Calls(task.TaskID)
			calls += c
			switch got.State {
			case ledger.StateCompleted:
				completed++
			case ledger.StateNeedsReview:
				if c != 0 {
					t.Errorf("task %s was parked over the quota after %d provider calls, want none", task.TaskID, c)
				}
				r, err := b.l.GetReview(ctx, task.TaskID)
				if err != nil {
					t.Fatalf("review of %s: %v", task.TaskID, err)
				}
				if r.Reason != ledger.ReviewBudgetExhausted || r.ErrorClass != "quota_exceeded" {
					t.Errorf("task %s parked with reason %q, class %q; want budget_exhausted, quota_exceeded", task.TaskID, r.Reason, r.ErrorClass)
				}
			default:
				t.Errorf("task %s ended %s (%s: %s); want completed, or parked over the quota", task.TaskID, got.State, got.ErrorClass, got.ErrorMessage)
			}
		}
		used, err := s.Quotas.Used(ctx, "anonymous")
		if err != nil {
			t.Fatal(err)
		}
		peak := probe.Peak()
		t.Logf("%d calls (peak %d in flight), %d completed, %d tokens charged of a %d-token quota", calls, peak, completed, used, quota)
		if used > quota+int64(peak)*burstReserve {
			t.Fatalf("the caller's day was charged %d tokens: over its quota of %d plus one %d-token reservation for each of the %d calls in flight",
				used, quota, burstReserve, peak)
		}
		// The provider reports less than each call reserved, so the
		// reservations keep the day within the quota itself.
		if used > quota {
			t.Fatalf("the caller's day was charged %d tokens, over its quota of %d, though no call used more than it reserved", used, quota)
		}
		if calls*burstUsed > quota {
			t.Fatalf("the provider was called %d times (%d tokens each) under a %d-token quota", calls, burstUsed, quota)
		}
		if completed == 0 || calls != completed {
			t.Fatalf("%d provider calls for %d completed tasks; want at least one, each completing its task", calls, completed)
		}
		// Every reservation was settled to what its call reported.
		if used != int64(calls*burstUsed) {
			t.Fatalf("the day holds %d tokens for %d calls of %d: a reservation was left counted or mis-settled", used, calls, burstUsed)
		}
		// Parked only once the settled calls left no room for one more.
		if completed < n && used+burstReserve <= quota {
			t.Fatalf("%d tasks parked while the settled %d tokens left room for another %d-token call", n-completed, used, burstReserve)
		}
	})
}

// Compile-time: the probe is a provider the worker can price.
var _ interface {
	contract.Provider
	Model() string
} = (*inFlight)(nil)

// quotaKey is the caller's quota item for the bundle clock's day.
func quotaKey(b *bundle, scope string) string {
	return spend.QuotaItemKey(scope, b.clock.Now().UTC().Format(time.DateOnly))
}

// TestQuotaRefusalGivesTheBudgetReservationBack: a budgeted task whose
// caller has used its day's quota reserves on its budget, is refused by
// the quota, gives the budget reservation back and is parked
// budget_exhausted (quota_exceeded) with no call — the review saying what
// the day used and what the call needed.
func TestQuotaRefusalGivesTheBudgetReservationBack(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 200})
		ctx := context.Background()
		if err := s.Quotas.Add(ctx, "anonymous", spend.Usage{InputTokens: 60, OutputTokens: 40}); err != nil {
			t.Fatal(err)
		}
		task := b.create(t, "quota-budgeted", budgetedPrompt, budget(10_000, nil))
		b.run(t, task.TaskID)
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateNeedsReview)
		if n := b.sim.Calls(task.TaskID); n != 0 {
			t.Fatalf("provider calls %d over the quota, want none", n)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Reason != ledger.ReviewBudgetExhausted || r.ErrorClass != "quota_exceeded" ||
			!strings.Contains(r.ErrorMessage, "used 100 tokens of 200 tokens") || !strings.Contains(r.ErrorMessage, "needs 110 tokens") {
			t.Fatalf("review %q / %q: %s", r.Reason, r.ErrorClass, r.ErrorMessage)
		}
		wantSpent(t, b, spend.ChainKeyOf(task), 0, 0)
		wantSpent(t, b, spend.TaskKeyOf(task), 0, 0)
		if used, err := s.Quotas.Used(ctx, "anonymous"); err != nil || used != 100 {
			t.Fatalf("quota used %d (%v) after a refusal, want the 100 used before", used, err)
		}
		if !strings.Contains(b.metrics.String(), `"QuotaExceeded":1`) {
			t.Fatalf("no QuotaExceeded count in %s", b.metrics.String())
		}
	})
}

// TestQuotaReserveFailureMakesNoCall: when the quota's reservation cannot
// be written, the provider is not called, the budget reservation is given
// back, and so are the assignment and its attempt; the message is retried.
func TestQuotaReserveFailureMakesNoCall(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		key := quotaKey(b, "anonymous")
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.TaskID == key && c.Key() == "DynamoDB.UpdateItem" {
				return faultinject.Throttle
			}
			return ""
		}))
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		withBudgets(t, b, awsclient.DynamoDB(cfg), &spend.Quota{Unit: spend.UnitTokens, Limit: 1_000_000})
		task := b.create(t, "quota-unwritable", budgetedPrompt, budget(10_000, nil))
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		wantFailures(t, handle(t, b.h, context.Background(), ev), ev.Records[0].MessageId)
		if inj.Total(faultinject.Throttle) == 0 {
			t.Fatal("no quota write failed")
		}
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateQueued || got.Attempts != 0 {
			t.Fatalf("task %s with %d attempts, want queued with its attempt given back", got.State, got.Attempts)
		}
		if n := b.sim.Calls(task.TaskID); n != 0 {
			t.Fatalf("provider calls %d without a quota reservation, want none", n)
		}
		wantSpent(t, b, spend.ChainKeyOf(task), 0, 0)
	})
}

// TestUnpricedCallsAreHeldToATokenQuota: a model the price table does not
// price cannot be charged a cost, but a token quota needs none: its call
// is reserved and settled by tokens. Uncounted, it was a way around the
// quota.
func TestUnpricedCallsAreHeldToATokenQuota(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		s := withPrices(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 1_000_000}, spendDocFor("another-model"))
		task := b.create(t, "quota-unpriced", budgetedPrompt)
		b.run(t, task.TaskID)
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
		if used, err := s.Quotas.Used(context.Background(), "anonymous"); err != nil || used != usedIn+usedOut {
			t.Fatalf("quota used %d (%v) by an unpriced call, want its %d tokens", used, err, usedIn+usedOut)
		}
	})
}

// TestUnpricedCallsUnderAUSDQuotaPark: a USD quota cannot hold a call the
// price table does not price, so the call is not made: provider_config.
func TestUnpricedCallsUnderAUSDQuotaPark(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		withPrices(t, b, e.DDB, &spend.Quota{Unit: spend.UnitUSD, Limit: 25_000_000}, spendDocFor("another-model"))
		task := b.create(t, "quota-unpriced-usd", budgetedPrompt)
		b.run(t, task.TaskID)
		wantParkedUncalled(t, b, task.TaskID, "daily quota counts USD")
	})
}

// deliverFor receives one message for each of ids and wraps them as one
// event. The worker leaves the message of a task it sent to wait in the
// queue, visible again after a delay in real time: on a slow engine those
// come back among the fresh ones, and a plain receive of len(ids) messages
// would hand a task two messages and another none, round after round. A
// message for a task not in ids, or a second one for a task, is deleted.
func (b *bundle) deliverFor(t *testing.T, ids []string, visibility int32) events.SQSEvent {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var keep []sqstypes.Message
	deadline := time.Now().Add(hangBound)
	for len(keep) < len(ids) {
		if time.Now().After(deadline) {
			t.Fatalf("received messages for %d of %d tasks within %s", len(keep), len(ids), hangBound)
		}
		for _, m := range b.poll(t, 10, visibility) {
			var body struct {
				TaskID string `json:"task_id"`
			}
			_ = json.Unmarshal([]byte(aws.ToString(m.Body)), &body)
			if want[body.TaskID] {
				delete(want, body.TaskID)
				keep = append(keep, m)
				continue
			}
			if _, err := b.e.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(b.e.Names.TaskQueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete a stale message: %v", err)
			}
		}
	}
	return b.event(t, loadEvent(t, "sqs-batch.json"), keep)
}
