package review

import (
	"fmt"
	"strings"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// BudgetSpend is the budget name of a spend (token or cost) budget in a
// budget_exhausted review.
const BudgetSpend = "spend"

// SpendExhausted explains a task parked by its worker because its spend
// budget (its regenerate chain's: every task of a chain shares one) cannot
// cover the next provider call's reservation: what was spent, what attempts
// in flight have reserved, what remains and what the call needed. The call
// was not made, so nothing is uncertain about this attempt.
func SpendExhausted(t *ledger.Task, e *spend.BudgetExhaustedError) ledger.Review {
	id := t.TaskID
	rt, rc := e.State.Remaining(e.Budget)
	limits := budgetLimits(e.Budget)
	whose := "its budget"
	if t.ChainRoot != "" {
		whose = "its regenerate chain's budget (root task " + t.ChainRoot + ")"
	}
	r := ledger.Review{Reason: ledger.ReviewBudgetExhausted, ErrorClass: "budget_exhausted",
		ErrorMessage: clip(fmt.Sprintf("spend budget exhausted: spent %s, remaining %s, the next call needs %s",
			amount(e.State.Spent.Tokens(), e.State.Spent.Cost), remaining(rt, rc, e.Budget), amount(e.Wanted.Tokens, e.Wanted.Cost)), MaxDetail)}
	r.Summary = fmt.Sprintf("Task %s stopped before attempt %d: %s (%s) has spent %s and %s remain, less than the %s the next provider call may use; no call was made; resolve it as failed, or submit it again with a larger budget.",
		id, t.Attempts, whose, limits, amount(e.State.Spent.Tokens(), e.State.Spent.Cost), remaining(rt, rc, e.Budget), amount(e.Wanted.Tokens, e.Wanted.Cost))
	r.Known = append(r.Known,
		"budget exhausted: "+BudgetSpend+" ("+limits+")",
		fmt.Sprintf("spent: %d input + %d output tokens, $%s (settled provider calls, as the provider reported them)",
			e.State.Spent.InputTokens, e.State.Spent.OutputTokens, e.State.Spent.Cost),
		fmt.Sprintf("reserved by attempts in flight (or whose worker stopped before settling): %s", amount(e.State.ReservedTokens, e.State.ReservedCost)),
		"remaining: "+remaining(rt, rc, e.Budget),
		fmt.Sprintf("the refused call needed %s (its input plus max output tokens, priced)", amount(e.Wanted.Tokens, e.Wanted.Cost)),
		fmt.Sprintf("attempt %d of %d was refused before the provider call: nothing was sent, generated or billed for it", t.Attempts, t.MaxAttempts),
	)
	r.Known = append(r.Known, lastError(t)...)
	if e.State.ReservedTokens > 0 || e.State.ReservedCost > 0 {
		r.Uncertain = append(r.Uncertain, "how much of the reserved amount the attempts in flight will really use: when they settle below it, a retry may fit the budget")
	} else {
		r.Uncertain = append(r.Uncertain, "nothing about this attempt (it was never sent); a retry is refused again while the budget stays as it is")
	}
	r.SafeActions = append(r.SafeActions,
		resolveFailed(id),
		"submit the task again (a new Idempotency-Key) with a larger budget",
	)
	if e.State.ReservedTokens > 0 || e.State.ReservedCost > 0 {
		r.SafeActions = append(r.SafeActions, "retry: "+retryCmd(id)+" once the reservations in flight have settled (the spend budget is not reset by a retry)")
	}
	return r
}

func budgetLimits(b spend.Budget) string {
	var parts []string
	if b.MaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("at most %d tokens", b.MaxTokens))
	}
	if b.MaxCost > 0 {
		parts = append(parts, "at most $"+b.MaxCost.String())
	}
	return strings.Join(parts, " and ")
}

func amount(tokens int64, cost spend.Micros) string {
	return fmt.Sprintf("%d tokens / $%s", tokens, cost)
}

func remaining(tokens int64, cost spend.Micros, b spend.Budget) string {
	var parts []string
	if b.MaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", tokens))
	}
	if b.MaxCost > 0 {
		parts = append(parts, "$"+cost.String())
	}
	return strings.Join(parts, " / ")
}

// QuotaExceeded explains a task parked by its worker because its caller's
// daily quota (tokens or USD per UTC day, every task of the caller
// together) has no room for the next provider call's reservation: what the
// caller used today, how much of it calls in flight hold, and what the
// call needed. The call was not made, so nothing is uncertain about this
// attempt. A call larger than the whole quota (e.NeverFits) can never
// run under it, on any day: the review says so, and offers a larger quota
// or a smaller call rather than a retry.
func QuotaExceeded(t *ledger.Task, e *spend.QuotaExceededError) ledger.Review {
	id := t.TaskID
	q := func(n int64) string {
		if e.Unit == spend.UnitUSD {
			return "$" + spend.Micros(n).String()
		}
		return fmt.Sprintf("%d tokens", n)
	}
	if e.NeverFits() {
		return quotaNeverFits(t, e, q)
	}
	r := ledger.Review{Reason: ledger.ReviewBudgetExhausted, ErrorClass: "quota_exceeded",
		ErrorMessage: clip(fmt.Sprintf("daily quota exceeded: the caller used %s of %s on %s (UTC), the next call needs %s",
			q(e.Used), q(e.Limit), e.Day, q(e.Wanted)), MaxDetail)}
	r.Summary = fmt.Sprintf("Task %s stopped before attempt %d: its caller's daily quota of %s has %s used on %s (UTC), %s of it reserved by calls in flight, no room for the %s the next provider call may use; no call was made; retry it after the quota frees (the next UTC day, in %s), or resolve it as failed.",
		id, t.Attempts, q(e.Limit), q(e.Used), e.Day, q(e.Reserved), q(e.Wanted), humanDuration(e.RetryAfter))
	r.Known = append(r.Known,
		"budget exhausted: the caller's daily quota ("+q(e.Limit)+" per UTC day, every task of the caller together)",
		fmt.Sprintf("used on %s: %s (settled provider calls as the provider reported them, and reservations)", e.Day, q(e.Used)),
		fmt.Sprintf("reserved by calls in flight (or whose worker stopped before settling): %s", q(e.Reserved)),
		fmt.Sprintf("the refused call needed %s (its input plus max output tokens, priced)", q(e.Wanted)),
		fmt.Sprintf("attempt %d of %d was refused before the provider call: nothing was sent, generated or billed for it", t.Attempts, t.MaxAttempts),
	)
	r.Known = append(r.Known, lastError(t)...)
	if e.HeldByCallsInFlight() {
		r.Uncertain = append(r.Uncertain, "how much of the reserved amount the calls in flight will really use: when they settle below it, a retry today may fit")
	} else {
		r.Uncertain = append(r.Uncertain, fmt.Sprintf("nothing about this attempt (it was never sent); the day's settled calls alone (%s) leave no room for it, and settled usage only grows within the day, so a retry is refused again until the next UTC day", q(e.Settled())))
	}
	r.SafeActions = append(r.SafeActions,
		"retry: "+retryCmd(id)+" after the quota frees (the next UTC day starts from nothing; the quota is not reset by a retry)",
		resolveFailed(id),
		"raise the per-caller daily quota (the template's DailyQuotaTokensPerCaller, or SPEND_CONFIG's daily_quota) if this caller's use is expected",
	)
	return r
}

// quotaNeverFits is QuotaExceeded for a call whose reservation alone is
// larger than the whole daily quota: no day has room for it, so a retry
// (today or later) is refused the same way.
func quotaNeverFits(t *ledger.Task, e *spend.QuotaExceededError, q func(int64) string) ledger.Review {
	id := t.TaskID
	r := ledger.Review{Reason: ledger.ReviewBudgetExhausted, ErrorClass: "quota_exceeded",
		ErrorMessage: clip(fmt.Sprintf("daily quota exceeded: the next call needs %s, more than the caller's whole daily quota of %s",
			q(e.Wanted), q(e.Limit)), MaxDetail)}
	r.Summary = fmt.Sprintf("Task %s stopped before attempt %d: one provider call of it may use %s, more than its caller's whole daily quota of %s, so it can never run under this quota, on any day; no call was made; raise the per-caller daily quota, or submit it again with a lower input.max_tokens or a shorter input (fewer or smaller documents), or resolve it as failed.",
		id, t.Attempts, q(e.Wanted), q(e.Limit))
	r.Known = append(r.Known,
		"budget exhausted: the caller's daily quota ("+q(e.Limit)+" per UTC day, every task of the caller together)",
		fmt.Sprintf("the refused call needed %s (its input plus max output tokens, priced): more than the whole quota", q(e.Wanted)),
		fmt.Sprintf("attempt %d of %d was refused before the provider call: nothing was sent, generated or billed for it", t.Attempts, t.MaxAttempts),
	)
	r.Known = append(r.Known, lastError(t)...)
	r.Uncertain = append(r.Uncertain, "nothing about this attempt (it was never sent); a retry is refused the same way while the quota and the task stay as they are")
	r.SafeActions = append(r.SafeActions,
		resolveFailed(id),
		"submit the task again (a new Idempotency-Key) with a lower input.max_tokens (unset, it reserves "+fmt.Sprint(contract.MaxTokensLimit)+" output tokens) or a shorter input",
		"raise the per-caller daily quota (the template's DailyQuotaTokensPerCaller, or SPEND_CONFIG's daily_quota) above "+q(e.Wanted)+", then retry: "+retryCmd(id),
	)
	return r
}
