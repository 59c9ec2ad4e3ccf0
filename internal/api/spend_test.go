package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func budgetBody(prompt, budget string) string {
	return fmt.Sprintf(`{"kind":"generate","input":{"prompt":%q,"max_tokens":100},"budget":%s}`, prompt, budget)
}

func withSpend(e *testenv.Env, clock *testenv.Clock, quota *spend.Quota) func(*option) {
	return withHandler(func(h *api.Handler) {
		acct, err := spend.NewAccountant(spend.AccountantConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Now: clock.Now})
		if err != nil {
			panic(err)
		}
		h.Budgets = acct
		if quota != nil {
			q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: *quota, Now: clock.Now})
			if err != nil {
				panic(err)
			}
			h.Quotas = q
		}
	})
}

// quotaClock is a clock at the time of day tod of the next UTC day: the
// quota tests pin the time of day (Retry-After counts to midnight) on a
// date ahead of the real time, by which kumo deletes expired items every
// 30 s — on a past date the quota items (72 h) and the tasks (7 days)
// could be gone mid-test.
func quotaClock(tod time.Duration) *testenv.Clock {
	return testenv.NewClock(testenv.NextUTCDay(time.Now()).Add(tod))
}

// TestSubmitBudget: a budget is stored on the task, is part of the payload
// hash (the same key with another budget is 422; the same budget written
// differently replays), and a regenerate inherits the chain's budget and
// root, also from a regenerate of a regenerate. The views show the budget
// and the (still zero) usage of the task and its chain.
func TestSubmitBudget(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now())
		b := setup(t, e, withSpend(e, clock, nil))
		e.Counter.Reset()
		resp := b.do(t, submitReq("budget-1", budgetBody("p", `{"max_total_tokens":5000,"max_cost_usd":0.25}`)))
		wantStatus(t, resp, http.StatusAccepted)
		// A fresh budgeted task has reserved nothing: its 202 shows zero
		// usage without reading the budget items (the submit call floor:
		// the watch item, the task, the message).
		if got := fmt.Sprint(e.Counter.Calls()); got != "map[DynamoDB.PutItem:2 SQS.SendMessage:1]" {
			t.Fatalf("a budgeted submit made %s, want two PutItems (watch item, task) and one SendMessage", got)
		}
		v := view(t, resp)
		root, err := b.l.Get(context.Background(), v.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if root.BudgetMaxTokens != 5000 || root.BudgetMaxMicros != 250_000 || root.ChainRoot != "" {
			t.Fatalf("stored budget %d tokens %d micros root %q; want 5000, 250000, none", root.BudgetMaxTokens, root.BudgetMaxMicros, root.ChainRoot)
		}
		if v.Budget == nil || v.Budget.MaxTotalTokens != 5000 || v.Budget.MaxCostUSD != "0.250000" {
			t.Fatalf("view budget %+v", v.Budget)
		}
		if v.Usage == nil || v.Usage.InputTokens != 0 || v.Usage.CostUSD != "0.000000" || v.ChainUsage == nil {
			t.Fatalf("view usage %+v chain %+v; want zero usage for both", v.Usage, v.ChainUsage)
		}

		// Same budget, other spelling and key order: a replay.
		resp = b.do(t, submitReq("budget-1", budgetBody("p", `{ "max_cost_usd":0.250, "max_total_tokens":5000 }`)))
		wantStatus(t, resp, http.StatusOK)
		// Another budget under the same key: 422, nothing written.
		wantProblem(t, b.do(t, submitReq("budget-1", budgetBody("p", `{"max_total_tokens":5001,"max_cost_usd":0.25}`))), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
		wantProblem(t, b.do(t, submitReq("budget-1", `{"kind":"generate","input":{"prompt":"p","max_tokens":100}}`)), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
		// Exactly one call's reservation is enough.
		wantStatus(t, b.do(t, submitReq("budget-fits", budgetBody("p", `{"max_total_tokens":133}`))), http.StatusAccepted)

		regen := view(t, b.do(t, regenReq(root.TaskID, "budget-regen-1", "")))
		regen2 := view(t, b.do(t, regenReq(regen.TaskID, "budget-regen-2", `{"input":{"prompt":"q","max_tokens":100}}`)))
		for _, id := range []string{regen.TaskID, regen2.TaskID} {
			got, err := b.l.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if got.ChainRoot != root.TaskID || got.BudgetMaxTokens != 5000 || got.BudgetMaxMicros != 250_000 {
				t.Fatalf("regenerate %s: chain root %q budget %d/%d; want %s, 5000/250000", id, got.ChainRoot, got.BudgetMaxTokens, got.BudgetMaxMicros, root.TaskID)
			}
		}

		// Usage settled on the chain shows in every view of the chain.
		r := spend.Reservation{ID: regen.TaskID + ".1", Tokens: 100, Cost: 1000}
		for _, k := range []string{spend.ChainKeyOf(stored(t, b, root.TaskID)), spend.TaskKeyOf(stored(t, b, regen.TaskID))} {
			if _, err := b.h.Budgets.Reserve(context.Background(), k, spend.Budget{}, r); err != nil {
				t.Fatal(err)
			}
			if _, err := b.h.Budgets.Settle(context.Background(), k, r, spend.Usage{InputTokens: 10, OutputTokens: 20, Cost: 345}); err != nil {
				t.Fatal(err)
			}
		}
		rv := view(t, b.do(t, getReq(regen.TaskID)))
		if rv.Usage == nil || rv.Usage.InputTokens != 10 || rv.Usage.OutputTokens != 20 || rv.Usage.CostUSD != "0.000345" {
			t.Fatalf("regenerate usage %+v", rv.Usage)
		}
		root2 := view(t, b.do(t, getReq(root.TaskID)))
		if root2.Usage == nil || root2.Usage.OutputTokens != 0 || root2.ChainUsage == nil || root2.ChainUsage.OutputTokens != 20 {
			t.Fatalf("root usage %+v chain %+v; want its own zero and the chain's 20 output tokens", root2.Usage, root2.ChainUsage)
		}

		// A task without a budget shows none and costs no spend read.
		plain := view(t, b.do(t, submitReq("no-budget", body("p"))))
		e.Counter.Reset()
		pv := view(t, b.do(t, getReq(plain.TaskID)))
		if pv.Budget != nil || pv.Usage != nil || pv.ChainUsage != nil {
			t.Fatalf("unbudgeted view has spend fields: %+v", pv)
		}
		if got := fmt.Sprint(e.Counter.Calls()); got != "map[DynamoDB.GetItem:1]" {
			t.Fatalf("GET of an unbudgeted task made %s, want one GetItem", got)
		}
	})
}

// TestSubmitBudgetRejected: every malformed budget is a 400 naming the
// field, and nothing is written.
func TestSubmitBudgetRejected(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		cases := []struct{ budget, field string }{
			{`null`, "budget"},
			{`[]`, "budget"},
			{`{}`, "budget"},
			{`"5"`, "budget"},
			{`{"max_tokens":5}`, "budget.max_tokens"},
			{`{"max_total_tokens":0}`, "budget.max_total_tokens"},
			{`{"max_total_tokens":-3}`, "budget.max_total_tokens"},
			{`{"max_total_tokens":1.5}`, "budget.max_total_tokens"},
			{`{"max_total_tokens":1e3}`, "budget.max_total_tokens"},
			{`{"max_total_tokens":"100"}`, "budget.max_total_tokens"},
			{`{"max_total_tokens":1000000000001}`, "budget.max_total_tokens"},
			{`{"max_cost_usd":0}`, "budget.max_cost_usd"},
			{`{"max_cost_usd":-1}`, "budget.max_cost_usd"},
			{`{"max_cost_usd":0.0000001}`, "budget.max_cost_usd"},
			{`{"max_cost_usd":1e-3}`, "budget.max_cost_usd"},
			{`{"max_cost_usd":1000001}`, "budget.max_cost_usd"},
			{`{"max_cost_usd":1,"max_cost_usd":2}`, "budget.max_cost_usd"},
			// One call reserves 1 + 32 + 100 tokens: a smaller budget could never run it.
			{`{"max_total_tokens":132}`, "budget.max_total_tokens"},
		}
		for i, c := range cases {
			resp := b.do(t, submitReq(fmt.Sprintf("bad-budget-%d", i), budgetBody("p", c.budget)))
			p := wantProblem(t, resp, http.StatusBadRequest, api.TypeInvalidBody)
			if p.Field != c.field || !strings.Contains(p.Detail, "budget") {
				t.Errorf("budget %s: field %q detail %q; want field %q and a detail about the budget", c.budget, p.Field, p.Detail, c.field)
			}
		}
		if n := len(scanTasks(t, e)); n != 0 {
			t.Fatalf("%d items written by rejected submits", n)
		}
	})
}

// TestQuotaExceededWritesNothing: a caller over its daily quota gets 429
// problem+json with Retry-After = the seconds to the next UTC day; the
// refusal costs two GetItems — the quota's, and the key's (a task recorded
// under it would be replayed, not refused) — and writes nothing (no task,
// no message); the
// quota is per caller, and a caller under it submits as usual.
func TestQuotaExceededWritesNothing(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := quotaClock(23*time.Hour + 59*time.Minute + 500*time.Millisecond)
		// Room for one call of body("p"): 8,225 tokens reserved.
		quota := spend.Quota{Unit: spend.UnitTokens, Limit: 10_000}
		b := setup(t, e, withSpend(e, clock, &quota))
		q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: quota, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Add(context.Background(), "jwt:alice", spend.Usage{InputTokens: 4000, OutputTokens: 6000}); err != nil {
			t.Fatal(err)
		}
		before := len(scanTasks(t, e))
		e.Counter.Reset()
		resp := b.do(t, submitReq("over-quota", body("p"), asJWT("alice")))
		p := wantProblem(t, resp, http.StatusTooManyRequests, api.TypeQuotaExceeded)
		if resp.Headers["Retry-After"] != "60" || p.RetryAfter != 60 {
			t.Fatalf("Retry-After %q (problem %d), want 60 (59.5 s to the next UTC day, rounded up)", resp.Headers["Retry-After"], p.RetryAfter)
		}
		if !strings.Contains(p.Detail, "used 10000 tokens of its daily quota of 10000 tokens") {
			t.Fatalf("detail %q", p.Detail)
		}
		if got := fmt.Sprint(e.Counter.Calls()); got != "map[DynamoDB.GetItem:2]" {
			t.Fatalf("a refused submit made %s, want two GetItems (the quota, the key)", got)
		}
		if n := len(scanTasks(t, e)); n != before {
			t.Fatalf("items %d after the refused submit, %d before", n, before)
		}
		if counts, _ := drainQueue(t, e); len(counts) != 0 {
			t.Fatalf("messages sent: %v", counts)
		}
		if !strings.Contains(b.metrics.String(), `"QuotaExceeded":1`) {
			t.Fatalf("no QuotaExceeded metric in %s", b.metrics.String())
		}
		// Regenerate is refused the same way.
		wantProblem(t, b.do(t, regenReq("t_aaaaaaaaaaaaaaaaaaaaaaaaaa", "over-quota-regen", "", asJWT("alice"))), http.StatusTooManyRequests, api.TypeQuotaExceeded)

		// Another caller is not affected; its submit costs the quota read
		// besides the floor (the watch item, the task, the message).
		e.Counter.Reset()
		wantStatus(t, b.do(t, submitReq("under-quota", body("p"), asJWT("bob"))), http.StatusAccepted)
		if got := fmt.Sprint(e.Counter.Calls()); got != "map[DynamoDB.GetItem:1 DynamoDB.PutItem:2 SQS.SendMessage:1]" {
			t.Fatalf("an accepted submit with a quota made %s", got)
		}
		// The next UTC day the quota is fresh.
		clock.Advance(time.Minute)
		wantStatus(t, b.do(t, submitReq("over-quota", body("p"), asJWT("alice"))), http.StatusAccepted)
	})
}

// The usage numbers are JSON numbers.
func TestUsageViewIsNumeric(t *testing.T) {
	raw, err := json.Marshal(api.UsageView{InputTokens: 1, OutputTokens: 2, CostUSD: json.Number(spend.Micros(1234567).String())})
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"input_tokens":1,"output_tokens":2,"cost_usd":1.234567}` {
		t.Fatalf("usage JSON %s", raw)
	}
}

// stored is the task with id as the ledger holds it (budget keys need its
// creation: spend.ChainKeyOf, spend.TaskKeyOf).
func stored(t *testing.T, b *bundle, id string) *ledger.Task {
	t.Helper()
	got, err := b.l.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("read task %s: %v", id, err)
	}
	return got
}
