package review_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestSpendExhausted(t *testing.T) {
	tk := task(ledger.StateRunning)
	tk.ChainRoot = "t_rootrootrootrootrootrootro"
	e := &spend.BudgetExhaustedError{
		Key:    spend.ChainKey(tk.ChainRoot),
		Budget: spend.Budget{MaxTokens: 1000, MaxCost: 50_000},
		State:  spend.State{Spent: spend.Usage{InputTokens: 300, OutputTokens: 400, Cost: 20_000}, ReservedTokens: 200, ReservedCost: 10_000},
		Wanted: spend.Reservation{ID: tk.TaskID + ".6", Tokens: 350, Cost: 5_000},
	}
	r := review.SpendExhausted(tk, e)
	check(t, r, ledger.ReviewBudgetExhausted,
		"root task t_rootrootrootrootrootrootro",
		"at most 1000 tokens and at most $0.050000",
		"spent: 300 input + 400 output tokens, $0.020000",
		"reserved by attempts in flight (or whose worker stopped before settling): 200 tokens / $0.010000",
		"remaining: 100 tokens / $0.020000",
		"needed 350 tokens / $0.005000",
		"nothing was sent, generated or billed",
		"taskledger review retry "+tk.TaskID,
	)
	if !strings.Contains(r.ErrorMessage, "spend budget exhausted") || r.ErrorClass != "budget_exhausted" {
		t.Errorf("error %q / %q", r.ErrorClass, r.ErrorMessage)
	}
	// Nothing reserved: a retry would be refused again, so none is offered.
	e.State.ReservedTokens, e.State.ReservedCost = 0, 0
	r = review.SpendExhausted(tk, e)
	check(t, r, ledger.ReviewBudgetExhausted, "remaining: 300 tokens / $0.030000")
	if strings.Contains(all(r), "review retry") {
		t.Errorf("a retry is offered while nothing is reserved:\n%s", all(r))
	}
}

// A task refused by its caller's daily quota says what the day used, what
// calls in flight hold and what the call needed, in the quota's unit, and
// when the quota frees.
func TestQuotaExceededReview(t *testing.T) {
	tk := task(ledger.StateRunning)
	e := &spend.QuotaExceededError{Day: "2025-03-01", Unit: spend.UnitTokens, Used: 90, Reserved: 45, Limit: 100, Wanted: 45, RetryAfter: 13*time.Hour + 59*time.Minute}
	r := review.QuotaExceeded(tk, e)
	check(t, r, ledger.ReviewBudgetExhausted,
		"daily quota of 100 tokens has 90 tokens used on 2025-03-01",
		"45 tokens of it reserved by calls in flight",
		"in 13h59m",
		"the refused call needed 45 tokens",
		"nothing was sent, generated or billed",
		"taskledger review retry "+tk.TaskID,
	)
	if r.ErrorClass != "quota_exceeded" || !strings.Contains(r.ErrorMessage, "used 90 tokens of 100 tokens on 2025-03-01") {
		t.Errorf("error %q / %q", r.ErrorClass, r.ErrorMessage)
	}
	e.Unit, e.Used, e.Reserved, e.Limit, e.Wanted = spend.UnitUSD, 25_000_000, 0, 25_000_000, 3_000
	check(t, review.QuotaExceeded(tk, e), ledger.ReviewBudgetExhausted, "daily quota of $25.000000", "needed $0.003000", "refused again until the next UTC day")
}

// A call larger than the caller's whole daily quota can never run under
// it: the review says so and offers a larger quota or a smaller call, not
// a retry on the next UTC day.
func TestQuotaNeverFitsReview(t *testing.T) {
	tk := task(ledger.StateRunning)
	e := &spend.QuotaExceededError{Day: "2025-03-01", Unit: spend.UnitTokens, Used: 0, Limit: 1000, Wanted: 8225, RetryAfter: 13 * time.Hour}
	r := review.QuotaExceeded(tk, e)
	check(t, r, ledger.ReviewBudgetExhausted,
		"may use 8225 tokens, more than its caller's whole daily quota of 1000 tokens",
		"can never run under this quota, on any day",
		"lower input.max_tokens",
		"raise the per-caller daily quota",
		"nothing was sent, generated or billed",
	)
	if text := all(r); strings.Contains(text, "next UTC day") || strings.Contains(text, "after the quota frees") {
		t.Errorf("the review of a call larger than the whole quota promises a later day:\n%s", text)
	}
	if r.ErrorClass != "quota_exceeded" || !strings.Contains(r.ErrorMessage, "more than the caller's whole daily quota of 1000 tokens") {
		t.Errorf("error %q / %q", r.ErrorClass, r.ErrorMessage)
	}
}
