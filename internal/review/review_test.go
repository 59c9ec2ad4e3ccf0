package review_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
)

const secret = "PROMPT-TEXT-MUST-NOT-APPEAR"

func task(state ledger.State) *ledger.Task {
	created := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	return &ledger.Task{
		TaskID: "t_abcdefghijklmnopqrstuvwxyz", State: state, Input: `{"prompt":"` + secret + `"}`,
		Result: `{"text":"` + secret + `"}`, Attempts: 5, MaxAttempts: 5,
		CreatedMs: created.UnixMilli(), MaxAgeMs: time.Hour.Milliseconds(), DeadlineMs: created.Add(time.Hour).UnixMilli(),
		UpdatedMs: created.Add(30 * time.Minute).UnixMilli(), LeaseOwner: "req-1/rec-2",
		LeaseUntil: created.Add(20 * time.Minute).UnixMilli(), ErrorClass: "transient", ErrorMessage: "503 from provider",
	}
}

func all(r ledger.Review) string {
	return strings.Join(append(append(append([]string{r.Summary}, r.Known...), r.Uncertain...), r.SafeActions...), "\n")
}

func check(t *testing.T, r ledger.Review, reason string, wants ...string) {
	t.Helper()
	if r.Reason != reason {
		t.Errorf("reason = %q, want %q", r.Reason, reason)
	}
	if len(r.Known) == 0 || len(r.Uncertain) == 0 || len(r.SafeActions) == 0 {
		t.Errorf("empty list: known=%d uncertain=%d safe=%d", len(r.Known), len(r.Uncertain), len(r.SafeActions))
	}
	if !strings.HasSuffix(r.Summary, ".") || strings.Contains(strings.TrimSuffix(r.Summary, "."), ". ") {
		t.Errorf("summary is not one sentence: %q", r.Summary)
	}
	text := all(r)
	if strings.Contains(text, secret) {
		t.Errorf("task text leaked into the review item:\n%s", text)
	}
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("missing %q in:\n%s", w, text)
		}
	}
}

func TestBudgetExhausted(t *testing.T) {
	t.Parallel()
	r := review.BudgetExhausted(task(ledger.StateRetryWait), review.BudgetAttempts)
	check(t, r, ledger.ReviewBudgetExhausted, "used 5 of 5 attempts", "no attempt was in flight", "review retry t_abcdefghijklmnopqrstuvwxyz", "--outcome failed", "last error class: transient (503 from provider)")
	if strings.Contains(all(r), "--outcome completed") {
		t.Error("a task with no attempt in flight must not suggest resolving as completed")
	}

	r = review.BudgetExhausted(task(ledger.StateRunning), review.BudgetAge)
	check(t, r, ledger.ReviewBudgetExhausted, "1h age budget", "2025-03-01T11:00:00Z", "may have reached the provider", `leased to "req-1/rec-2" until 2025-03-01T10:20:00Z`, "--outcome completed", "possible duplicate")
}

func TestUnknownOutcome(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 10, 30, 0, 0, time.UTC)
	r := review.UnknownOutcome(task(ledger.StateUnknown), "simulated", at, "the provider offers no readback")
	check(t, r, ledger.ReviewUnknownOutcome,
		"the provider may have produced a result at 2025-03-01T10:30:00Z; no readback is possible; safe: resolve as completed with evidence, or retry accepting a possible duplicate generation",
		"simulated with operation id t_abcdefghijklmnopqrstuvwxyz", "no readback: the provider offers no readback")
}

func TestProviderConfig(t *testing.T) {
	t.Parallel()
	r := review.ProviderConfig(task(ledger.StateRunning), errors.New("401 invalid api key"))
	check(t, r, ledger.ReviewProviderConfig, "provider error: 401 invalid api key", "fix the provider configuration")
	if r.ErrorClass != "permanent_config" || r.ErrorMessage != "401 invalid api key" {
		t.Errorf("error fields = %q %q", r.ErrorClass, r.ErrorMessage)
	}
}

func TestStaleLease(t *testing.T) {
	t.Parallel()
	check(t, review.StaleLease(task(ledger.StateRunning)), ledger.ReviewStaleLease, "stopped renewing its lease at 2025-03-01T10:20:00Z", "does not deduplicate")
}

func TestPoison(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 2000)
	r := review.Poison("m-1", "abc123", 17, long)
	check(t, r, ledger.ReviewPoisonMessage, "17 bytes, SHA-256 abc123", "review resolve msg_m-1 --outcome failed", "no task was created")
	if r.MessageID != "m-1" || r.BodySHA256 != "abc123" || r.BodyBytes != 17 {
		t.Errorf("poison fields = %+v", r)
	}
	if len(r.ErrorMessage) > review.MaxDetail+4 {
		t.Errorf("error message not clipped: %d bytes", len(r.ErrorMessage))
	}
}
