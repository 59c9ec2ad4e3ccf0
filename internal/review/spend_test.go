package review_test

import (
	"strings"
	"testing"

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
