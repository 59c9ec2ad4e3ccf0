package worker_test

// Spend budgets and the daily quota in the worker (spend.go, DESIGN §13),
// on kumo and moto.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The simulated model at $3 / $15 per million tokens.
var spendDoc = spendDocFor("simulated-1")

// spendDocFor prices model at $3 / $15 per million tokens.
func spendDocFor(model string) string {
	return `{"models":{"` + model + `":{"input_usd_per_mtok":3,"output_usd_per_mtok":15}}}`
}

// budgetedPrompt reserves 28 + 32 input and 50 output tokens = 110; the
// simulated provider reports 5 input and 24 output tokens = 29.
const budgetedPrompt = `{"prompt":"write one line about ledgers","max_tokens":50}`

const (
	reserveTokens = 110
	usedIn        = 5
	usedOut       = 24
)

// withBudgets gives the bundle's worker spend accounting over db (the
// test's DynamoDB client, or one with faults injected) and returns it.
func withBudgets(t *testing.T, b *bundle, db spend.DB, quota *spend.Quota) *worker.Spend {
	t.Helper()
	return withPrices(t, b, db, quota, spendDoc)
}

// withPrices is withBudgets with the price table doc (SPEND_CONFIG).
func withPrices(t *testing.T, b *bundle, db spend.DB, quota *spend.Quota, doc string) *worker.Spend {
	t.Helper()
	cfg, err := spend.ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	acct, err := spend.NewAccountant(spend.AccountantConfig{DB: db, TasksTable: b.e.Names.TasksTable, Now: b.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	s := &worker.Spend{Prices: cfg, Budgets: acct}
	if quota != nil {
		if s.Quotas, err = spend.NewQuotas(spend.QuotasConfig{DB: db, TasksTable: b.e.Names.TasksTable, Quota: *quota, Now: b.clock.Now}); err != nil {
			t.Fatal(err)
		}
	}
	b.h.Spend = s
	return s
}

// budget gives a task a token budget; with root, as a regenerate of root's
// chain (its id and creation name the chain's budget).
func budget(tokens int64, root *ledger.Task) func(*ledger.NewTask) {
	return func(n *ledger.NewTask) {
		n.BudgetMaxTokens = tokens
		if root != nil {
			n.ChainRoot, n.ChainEpochMs = root.TaskID, root.ChainEpoch()
		}
	}
}

// handleInBackground handles ev while the test goes on (a gate holds the
// provider call); the channel closes once the batch is handled, with no
// item failure.
func handleInBackground(t *testing.T, b *bundle, ctx context.Context, ev events.SQSEvent) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		wantNoFailures(t, handle(t, b.h, ctx, ev))
	}()
	return done
}

func spendState(t *testing.T, b *bundle, key string) spend.State {
	t.Helper()
	acct, err := spend.NewAccountant(spend.AccountantConfig{DB: b.e.DDB, TasksTable: b.e.Names.TasksTable})
	if err != nil {
		t.Fatal(err)
	}
	s, err := acct.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return *s
}

func wantSpent(t *testing.T, b *bundle, key string, in, out int64) {
	t.Helper()
	s := spendState(t, b, key)
	cost := spend.Micros(in*3 + out*15) // $3 and $15 per million tokens, in micro-dollars
	if s.Spent.InputTokens != in || s.Spent.OutputTokens != out || s.Spent.Cost != cost || s.ReservedTokens != 0 || s.ReservedCost != 0 {
		t.Fatalf("%s: spent %+v reserved %d tokens / %s; want %d+%d tokens, $%s, nothing reserved", key, s.Spent, s.ReservedTokens, s.ReservedCost, in, out, cost)
	}
}

func itemExists(t *testing.T, b *bundle, key string) bool {
	t.Helper()
	out, err := b.e.DDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &b.e.Names.TasksTable, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: key}}})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Item) > 0
}

// run sends the tasks' messages and handles them as one batch.
func (b *bundle) run(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		b.send(t, id)
	}
	wantNoFailures(t, handle(t, b.h, context.Background(), b.deliver(t, len(ids), 60)))
}

// TestSpendCallsOnlyForBudgetedTasks: with spend accounting configured, a
// task without a budget makes no spend item and no read: claim, complete,
// and the reserve and settle of the caller's daily quota — leaving the
// budget out is no way around the quota — and its tokens and cost reach
// the metrics; a budgeted one costs two reserves and two settles more,
// settles the provider's reported usage (priced) on its own and its
// chain's item and the quota, and writes the tokens and cost as metrics.
func TestSpendCallsOnlyForBudgetedTasks(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		quota := &spend.Quota{Unit: spend.UnitTokens, Limit: 1_000_000}
		s := withBudgets(t, b, e.DDB, quota)

		plain := b.create(t, "spend-plain", budgetedPrompt)
		b.send(t, plain.TaskID)
		ev := b.deliver(t, 1, 60)
		e.Counter.Reset()
		wantNoFailures(t, handle(t, b.h, context.Background(), ev))
		calls := e.Counter.Calls()
		wantState(t, b.get(t, plain.TaskID), ledger.StateCompleted)
		if calls["DynamoDB.UpdateItem"] != 4 || calls["DynamoDB.GetItem"] != 0 {
			t.Fatalf("an unbudgeted task made %v; want the claim, the completion and the quota's reserve and settle only", calls)
		}
		if itemExists(t, b, spend.BudgetItemKey(plain.TaskID)) || itemExists(t, b, spend.BudgetItemKey(spend.ChainKeyOf(plain))) {
			t.Fatal("a spend item was written for an unbudgeted task")
		}
		if used, err := s.Quotas.Used(context.Background(), "anonymous"); err != nil || used != usedIn+usedOut {
			t.Fatalf("quota used %d (%v) after an unbudgeted task, want its %d tokens", used, err, usedIn+usedOut)
		}
		if !strings.Contains(b.metrics.String(), `"OutputTokens":24`) || !strings.Contains(b.metrics.String(), `"CostUSD":0.000375`) {
			t.Fatalf("no usage metrics for an unbudgeted task in %s", b.metrics.String())
		}

		task := b.create(t, "spend-budgeted", budgetedPrompt, budget(10_000, nil))
		b.send(t, task.TaskID)
		ev = b.deliver(t, 1, 60)
		e.Counter.Reset()
		wantNoFailures(t, handle(t, b.h, context.Background(), ev))
		calls = e.Counter.Calls()
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		if calls["DynamoDB.UpdateItem"] != 2+4+2 || calls["DynamoDB.GetItem"] != 0 {
			t.Fatalf("a budgeted task made %v; want claim, completion, 2 reserves, 2 settles and the quota's reserve and settle", calls)
		}
		var out contract.GenerateOutput
		if err := json.Unmarshal([]byte(got.Result), &out); err != nil || out.Usage.InputTokens != usedIn || out.Usage.OutputTokens != usedOut {
			t.Fatalf("result usage %+v (%v); the test expects %d+%d", out.Usage, err, usedIn, usedOut)
		}
		wantSpent(t, b, spend.TaskKeyOf(task), usedIn, usedOut)
		wantSpent(t, b, spend.ChainKeyOf(task), usedIn, usedOut)
		if used, err := s.Quotas.Used(context.Background(), "anonymous"); err != nil || used != 2*(usedIn+usedOut) {
			t.Fatalf("quota used %d (%v), want %d (both tasks)", used, err, 2*(usedIn+usedOut))
		}
		if !strings.Contains(b.metrics.String(), `"OutputTokens":24`) || !strings.Contains(b.metrics.String(), `"CostUSD":0.000375`) {
			t.Fatalf("no spend metrics in %s", b.metrics.String())
		}
	})
}

// TestSpendChainBudgetSharedAcrossRegenerates: a root and its regenerates
// share the chain's budget. With room for 150 tokens and calls reserving
// 110 and using 29, the root and one regenerate run; the second regenerate
// is parked budget_exhausted before any provider call, its review saying
// what the chain spent and what remains.
func TestSpendChainBudgetSharedAcrossRegenerates(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		withBudgets(t, b, e.DDB, nil)
		root := b.create(t, "chain-root", budgetedPrompt, budget(150, nil))
		b.run(t, root.TaskID)
		wantState(t, b.get(t, root.TaskID), ledger.StateCompleted)

		regen := b.create(t, "chain-regen-1", budgetedPrompt, budget(150, root))
		b.run(t, regen.TaskID)
		wantState(t, b.get(t, regen.TaskID), ledger.StateCompleted)

		last := b.create(t, "chain-regen-2", budgetedPrompt, budget(150, root))
		b.run(t, last.TaskID)
		parked := b.get(t, last.TaskID)
		wantState(t, parked, ledger.StateNeedsReview)
		if parked.ReviewReason != ledger.ReviewBudgetExhausted || b.sim.Calls(last.TaskID) != 0 {
			t.Fatalf("reason %q, provider calls %d; want budget_exhausted and none", parked.ReviewReason, b.sim.Calls(last.TaskID))
		}
		r, err := b.l.GetReview(context.Background(), last.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		text := r.Summary + "\n" + strings.Join(r.Known, "\n")
		for _, want := range []string{
			"has spent 58 tokens",
			"spent: 10 input + 48 output tokens",
			"remaining: 92 tokens",
			"needed 110 tokens",
			"nothing was sent, generated or billed",
			"root task " + root.TaskID,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("review lacks %q:\n%s", want, text)
			}
		}
		wantSpent(t, b, spend.ChainKeyOf(root), 2*usedIn, 2*usedOut)
		wantSpent(t, b, spend.TaskKeyOf(root), usedIn, usedOut)
		wantSpent(t, b, spend.TaskKeyOf(regen), usedIn, usedOut)
		if itemExists(t, b, spend.BudgetItemKey(last.TaskID)) {
			t.Fatal("the refused task has a spend item of its own")
		}
	})
}

// modelGate is the blocking provider of helpers_test.go with a model, so
// its calls can be priced.
type modelGate struct{ *gate }

func (modelGate) Model() string { return simulated.DefaultModel }

// TestSpendConcurrentAttemptsCannotOverspend: two tasks of one chain run in
// the same batch against a budget that fits one call's reservation. The
// first to reserve is held inside the provider; the other is refused and
// parked without a provider call; then the first completes.
func TestSpendConcurrentAttemptsCannotOverspend(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		withBudgets(t, b, e.DDB, nil)
		g := newGate(b.sim)
		b.h.Provider = modelGate{g}
		root := b.create(t, "race-root", budgetedPrompt, budget(150, nil))
		regen := b.create(t, "race-regen", budgetedPrompt, budget(150, root))
		b.send(t, root.TaskID)
		b.send(t, regen.TaskID)
		ev := b.deliver(t, 2, 60)
		done := handleInBackground(t, b, context.Background(), ev)
		g.waitStarted(t)
		// Wait (bounded) until the other task is parked while the first
		// call is still held.
		deadline := time.Now().Add(hangBound)
		for b.get(t, root.TaskID).State != ledger.StateNeedsReview && b.get(t, regen.TaskID).State != ledger.StateNeedsReview {
			if time.Now().After(deadline) {
				t.Fatal("neither task was parked while one call was in flight")
			}
			time.Sleep(20 * time.Millisecond)
		}
		close(g.release)
		await(t, done)
		states := map[ledger.State]int{}
		for _, id := range []string{root.TaskID, regen.TaskID} {
			states[b.get(t, id).State]++
		}
		if states[ledger.StateCompleted] != 1 || states[ledger.StateNeedsReview] != 1 {
			t.Fatalf("states %v; want one completed and one parked", states)
		}
		if n := b.sim.Calls(root.TaskID) + b.sim.Calls(regen.TaskID); n != 1 {
			t.Fatalf("provider calls %d, want 1", n)
		}
		wantSpent(t, b, spend.ChainKeyOf(root), usedIn, usedOut)
	})
}

// TestSpendLostRepliesDoNotDoubleCount: the first reserve and the first
// settle write on both budget items are applied and their replies lost.
// The repeats recognise their own reservation (and its absence after the
// settle), so each item counts the call exactly once.
func TestSpendLostRepliesDoNotDoubleCount(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := b.create(t, "spend-lost", budgetedPrompt, budget(10_000, nil))
		keys := map[string]bool{spend.BudgetItemKey(spend.ChainKeyOf(task)): true, spend.BudgetItemKey(spend.TaskKeyOf(task)): true}
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			// N=1 the reserve, N=2 its repeat, N=3 the settle, N=4 its repeat.
			if keys[c.TaskID] && c.Key() == "DynamoDB.UpdateItem" && (c.N == 1 || c.N == 3) {
				return faultinject.LostReply
			}
			return ""
		}))
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		withBudgets(t, b, awsclient.DynamoDB(cfg), nil)
		b.run(t, task.TaskID)
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
		if n := inj.Total(faultinject.LostReply); n != 4 {
			t.Fatalf("lost replies injected %d, want 4: %+v", n, inj.Injected())
		}
		wantSpent(t, b, spend.ChainKeyOf(task), usedIn, usedOut)
		wantSpent(t, b, spend.TaskKeyOf(task), usedIn, usedOut)
		if n := b.sim.SideEffects(task.TaskID); n != 1 {
			t.Fatalf("side effects %d, want 1", n)
		}
	})
}

// TestSpendUnknownOutcomeChargesTheReservation: an attempt whose outcome is
// unknown (the provider accepted and the reply was lost) is charged its
// full reservation: the provider may have generated and billed it — on
// its budget and on its caller's daily quota.
func TestSpendUnknownOutcomeChargesTheReservation(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true}))
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 1_000_000})
		task := b.create(t, "spend-unknown", `{"prompt":"write one line about ledgers","max_tokens":50,"simulate":"accept_lose_reply"}`, budget(10_000, nil))
		b.run(t, task.TaskID)
		wantState(t, b.get(t, task.TaskID), ledger.StateUnknown)
		in := int64(len(`write one line about ledgers`)) + contract.InputOverheadTokens
		wantSpent(t, b, spend.ChainKeyOf(task), in, 50)
		if used, err := s.Quotas.Used(context.Background(), "anonymous"); err != nil || used != in+50 {
			t.Fatalf("quota used %d (%v) by a call whose outcome is unknown, want its full reservation %d", used, err, in+50)
		}
	})
}

// TestSpendWithoutPriceTableParks: a budgeted task is never run unbudgeted;
// a worker without a price table parks it provider_config, with no call.
func TestSpendWithoutPriceTableParks(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := b.create(t, "spend-unpriced", budgetedPrompt, budget(10_000, nil))
		b.run(t, task.TaskID)
		wantParkedUncalled(t, b, task.TaskID, "no price table (SPEND_CONFIG)")
	})
}
