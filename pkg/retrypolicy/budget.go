package retrypolicy

import "time"

// Budget verdict reasons.
const (
	ReasonMaxAttempts = "max_attempts"
	ReasonMaxAge      = "max_age"
)

// BudgetVerdict says whether a task has used up its budgets.
type BudgetVerdict struct {
	// Exhausted is true when no further attempt may be made.
	Exhausted bool
	// Reason is "max_attempts", "max_age", or "" when not exhausted.
	Reason string
}

// Budget reports whether a task that has made attempts attempts and was
// created at createdAt has exhausted its budgets at now. maxAttempts is the
// task's own budget; <= 0 means p.MaxAttempts. The attempt budget is checked
// first: attempts >= maxAttempts is exhausted, as is an age
// (now - createdAt) >= MaxAge. A zero createdAt has an enormous age and so
// is exhausted: an unknown age parks the task rather than retrying forever.
func (p Policy) Budget(attempts, maxAttempts int, createdAt, now time.Time) BudgetVerdict {
	p = p.withDefaults()
	if maxAttempts <= 0 {
		maxAttempts = p.MaxAttempts
	}
	if attempts >= maxAttempts {
		return BudgetVerdict{Exhausted: true, Reason: ReasonMaxAttempts}
	}
	if now.Sub(createdAt) >= p.MaxAge {
		return BudgetVerdict{Exhausted: true, Reason: ReasonMaxAge}
	}
	return BudgetVerdict{}
}

// FitsAge reports whether a retry starting at retryAt would still be inside
// the age budget of a task created at createdAt, i.e. whether [Policy.Budget]
// would not report max_age at retryAt.
func (p Policy) FitsAge(createdAt, retryAt time.Time) bool {
	p = p.withDefaults()
	return retryAt.Sub(createdAt) < p.MaxAge
}
