package spend

import (
	"fmt"
	"time"
)

// ConfigError is a problem in the spend configuration document. Field is
// the JSON path ("models.m1.input_usd_per_mtok"), "" for the whole document.
type ConfigError struct{ Field, Problem string }

func (e *ConfigError) Error() string {
	if e.Field == "" {
		return "spend: config: " + e.Problem
	}
	return fmt.Sprintf("spend: config %s: %s", e.Field, e.Problem)
}

// UnknownModelError says the price table has no price for the model: the
// call cannot be priced, so it must not be made (a configuration problem,
// park it as provider_config rather than retry).
type UnknownModelError struct{ Model string }

func (e *UnknownModelError) Error() string {
	return fmt.Sprintf("spend: no price configured for model %q", e.Model)
}

// BudgetExhaustedError says a reservation does not fit the budget: what was
// spent, what is reserved by attempts in flight, what remains, and what the
// refused call needed — the facts for a budget_exhausted review item.
type BudgetExhaustedError struct {
	Key    string
	Budget Budget
	State  State
	Wanted Reservation
}

func (e *BudgetExhaustedError) Error() string {
	rt, rc := e.State.Remaining(e.Budget)
	return fmt.Sprintf("spend: budget %s exhausted: spent %d tokens / $%s, reserved %d tokens / $%s, remaining %d tokens / $%s; the call needs %d tokens / $%s",
		e.Key, e.State.Spent.Tokens(), e.State.Spent.Cost, e.State.ReservedTokens, e.State.ReservedCost,
		rt, rc, e.Wanted.Tokens, e.Wanted.Cost)
}

// QuotaExceededError says a caller's daily quota is used up, or has no
// room for a call. Used counts settled calls and the reservations of calls
// in flight (Reserved of it; Settled is the rest); Wanted is what the
// refused call (or submit) needed, 0 for "anything left?". Amounts are in
// Unit: tokens, or micro-dollars. RetryAfter is the time to the next UTC
// day (round it up to whole seconds for the Retry-After header:
// RetryAfterSeconds) — meaningless when the call NeverFits.
type QuotaExceededError struct {
	Day                   string
	Unit                  Unit
	Used, Reserved, Limit int64
	Wanted                int64
	RetryAfter            time.Duration
}

// Settled is what the day's settled calls used (Used without the
// reservations of calls in flight): it never shrinks within the day.
func (e *QuotaExceededError) Settled() int64 { return e.Used - e.Reserved }

// NeverFits reports whether the call alone needs more than the whole
// quota: it is refused on every day.
func (e *QuotaExceededError) NeverFits() bool { return e.Wanted > e.Limit }

// HeldByCallsInFlight reports whether the call fits what the day's
// settled calls left, and only the reservations of calls in flight keep
// it out: room frees as they settle (below their reservations, usually),
// so the call may wait for them rather than for the next day.
func (e *QuotaExceededError) HeldByCallsInFlight() bool {
	return e.Wanted > 0 && !e.NeverFits() && e.Settled()+e.Wanted <= e.Limit
}

func (e *QuotaExceededError) Error() string {
	if e.NeverFits() {
		return fmt.Sprintf("spend: daily quota exceeded: the call needs %d %s, more than the whole daily quota of %d", e.Wanted, e.Unit, e.Limit)
	}
	msg := fmt.Sprintf("spend: daily quota exceeded for %s: used %d of %d %s (%d of it reserved by calls in flight)", e.Day, e.Used, e.Limit, e.Unit, e.Reserved)
	if e.Wanted > 0 {
		msg += fmt.Sprintf("; the call needs %d", e.Wanted)
	}
	return msg + fmt.Sprintf("; retry after %ds", e.RetryAfterSeconds())
}

// RetryAfterSeconds is RetryAfter rounded up to whole seconds (at least 1).
func (e *QuotaExceededError) RetryAfterSeconds() int64 {
	s := int64((e.RetryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}
