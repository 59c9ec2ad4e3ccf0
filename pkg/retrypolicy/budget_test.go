package retrypolicy_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestBudget(t *testing.T) {
	t.Parallel()

	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		policy      retrypolicy.Policy
		attempts    int
		maxAttempts int
		age         time.Duration
		want        retrypolicy.BudgetVerdict
	}{
		{"Fresh", retrypolicy.Default(), 0, 0, 0, retrypolicy.BudgetVerdict{}},
		{"BelowDefaultAttempts", retrypolicy.Default(), 4, 0, time.Minute, retrypolicy.BudgetVerdict{}},
		{"AtDefaultAttempts", retrypolicy.Default(), 5, 0, time.Minute, retrypolicy.BudgetVerdict{Exhausted: true, Reason: "max_attempts"}},
		{"NegativeMaxUsesPolicy", retrypolicy.Policy{MaxAttempts: 2}, 2, -1, 0, retrypolicy.BudgetVerdict{Exhausted: true, Reason: "max_attempts"}},
		{"TaskMaxOverridesPolicy", retrypolicy.Default(), 5, 10, 0, retrypolicy.BudgetVerdict{}},
		{"TaskMaxReached", retrypolicy.Default(), 3, 3, 0, retrypolicy.BudgetVerdict{Exhausted: true, Reason: "max_attempts"}},
		{"ZeroPolicyDefaults", retrypolicy.Policy{}, 5, 0, 0, retrypolicy.BudgetVerdict{Exhausted: true, Reason: "max_attempts"}},
		{"JustYoungEnough", retrypolicy.Default(), 1, 0, time.Hour - time.Nanosecond, retrypolicy.BudgetVerdict{}},
		{"AtMaxAge", retrypolicy.Default(), 1, 0, time.Hour, retrypolicy.BudgetVerdict{Exhausted: true, Reason: "max_age"}},
		{"PastCustomMaxAge", retrypolicy.Policy{MaxAge: 10 * time.Minute}, 1, 0, 11 * time.Minute, retrypolicy.BudgetVerdict{Exhausted: true, Reason: "max_age"}},
		{"AttemptsCheckedFirst", retrypolicy.Default(), 9, 0, 2 * time.Hour, retrypolicy.BudgetVerdict{Exhausted: true, Reason: "max_attempts"}},
		{"ClockSkewNegativeAge", retrypolicy.Default(), 1, 0, -time.Minute, retrypolicy.BudgetVerdict{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			got := tt.policy.Budget(tt.attempts, tt.maxAttempts, created, created.Add(tt.age))
			if got != tt.want {
				t.Errorf("Budget(%d, %d, age %v) = %+v, want %+v", tt.attempts, tt.maxAttempts, tt.age, got, tt.want)
			}
		})
	}
}

func TestBudgetZeroCreatedAt(t *testing.T) {
	t.Parallel()

	got := retrypolicy.Default().Budget(0, 0, time.Time{}, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	if want := (retrypolicy.BudgetVerdict{Exhausted: true, Reason: "max_age"}); got != want {
		t.Errorf("Budget with zero createdAt = %+v, want %+v", got, want)
	}
}

func TestFitsAge(t *testing.T) {
	t.Parallel()

	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		policy retrypolicy.Policy
		after  time.Duration
		want   bool
	}{
		{"Soon", retrypolicy.Default(), time.Minute, true},
		{"JustInside", retrypolicy.Default(), time.Hour - time.Nanosecond, true},
		{"AtLimit", retrypolicy.Default(), time.Hour, false},
		{"Beyond", retrypolicy.Default(), 2 * time.Hour, false},
		{"CustomMaxAge", retrypolicy.Policy{MaxAge: 5 * time.Minute}, 6 * time.Minute, false},
		{"ZeroPolicyDefaults", retrypolicy.Policy{}, 59 * time.Minute, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			if got := tt.policy.FitsAge(created, created.Add(tt.after)); got != tt.want {
				t.Errorf("FitsAge(+%v) = %v, want %v", tt.after, got, tt.want)
			}
			// FitsAge and Budget must agree about the same instant.
			at := created.Add(tt.after)
			exhausted := tt.policy.Budget(0, 100, created, at).Exhausted
			if exhausted == tt.want {
				t.Errorf("FitsAge(+%v) = %v but Budget at that time says exhausted=%v", tt.after, tt.want, exhausted)
			}
		})
	}
}
