package review_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Every operator command a review suggests decides the park the review
// item records: copied later from a ticket or an alert, a command without
// --park would decide whatever park is open when it runs, possibly a later
// one whose reason its reader never saw. A builder knows the task, not the
// park, so the number is ledger.ParkMark, which the ledger's write of the
// item replaces. Each builder is checked in each of its wordings that
// suggests a command, and no command is left unquoted (uncopyable).
func TestEverySuggestedCommandDecidesThePark(t *testing.T) {
	at := time.Date(2025, 3, 1, 10, 30, 0, 0, time.UTC)
	f := review.Failure{Class: "permanent_config", Reason: "http_401", HTTPStatus: 401, Message: "bad key"}
	x := review.Result{ResultBytes: 500 * 1024, ProviderRef: "ref-1"}
	deliver := func(s ledger.State) *ledger.Task {
		tk := task(s)
		tk.Kind = ledger.KindDeliver
		return tk
	}
	gatedTask := func(s ledger.State) *ledger.Task {
		tk := task(s)
		tk.ApprovalRequired = true
		return tk
	}
	cancelled := task(ledger.StateUnknown)
	cancelled.AssignmentVersion, cancelled.CancelVersion = 3, 2
	reserved := &spend.BudgetExhaustedError{Budget: spend.Budget{MaxTokens: 1000},
		State: spend.State{ReservedTokens: 200}, Wanted: spend.Reservation{Tokens: 900}}
	quota := &spend.QuotaExceededError{Day: "2025-03-01", Unit: spend.UnitTokens, Used: 90, Reserved: 45, Limit: 100, Wanted: 45, RetryAfter: time.Hour}
	neverFits := &spend.QuotaExceededError{Day: "2025-03-01", Unit: spend.UnitTokens, Limit: 1000, Wanted: 8225}
	reviews := map[string]ledger.Review{
		"budget, queued":             review.BudgetExhausted(task(ledger.StateRetryWait), review.BudgetAttempts),
		"budget, lease lost":         review.BudgetExhausted(task(ledger.StateRunning), review.BudgetAge),
		"budget, gated":              review.BudgetExhausted(gatedTask(ledger.StateRunning), review.BudgetAge),
		"budget, attempt ended":      review.BudgetExhaustedAfter(task(ledger.StateRunning), review.BudgetAge, f, at),
		"budget, retry-safe":         review.BudgetExhaustedAfterClass(task(ledger.StateRunning), review.BudgetAttempts, review.Failure{}, time.Time{}, true),
		"budget, no call":            review.BudgetExhaustedNoCall(task(ledger.StateRunning), review.BudgetAttempts),
		"budget, readback absent":    review.BudgetExhaustedReadBackAbsent(task(ledger.StateUnknown), review.BudgetAttempts),
		"unknown outcome":            review.UnknownOutcome(task(ledger.StateUnknown), "bedrock", at, "no readback"),
		"unknown outcome, gated":     review.UnknownOutcome(gatedTask(ledger.StateUnknown), "bedrock", at, "no readback"),
		"unknown outcome, cancelled": review.UnknownOutcome(cancelled, "bedrock", at, "no readback"),
		"provider config":            review.ProviderConfig(task(ledger.StateRunning), "bedrock", f),
		"stale lease":                review.StaleLease(task(ledger.StateRunning)),
		"poison":                     review.Poison("m-1", strings.Repeat("0", 64), 3, "not JSON"),
		"result too large":           review.ResultTooLarge(task(ledger.StateRunning), x),
		"result not saved":           review.ResultNotSaved(task(ledger.StateRunning), x, errors.New("throttled")),
		"receipt not saved":          review.ResultNotSaved(deliver(ledger.StateRunning), x, errors.New("throttled")),
		"delivery unknown outcome":   review.DeliveryUnknownOutcome(deliver(ledger.StateUnknown), "notify", "no readback", at, "no readback"),
		"destination config":         review.DestinationConfig(deliver(ledger.StateRunning), "notify", f),
		"admission refused":          review.AdmissionRefused(task(ledger.StateRunning), "m", "over the limit"),
		"approval expired":           review.ApprovalExpired(task(ledger.StateAwaitingApproval)),
		"spend exhausted, reserved":  review.SpendExhausted(task(ledger.StateRunning), reserved),
		"quota exceeded":             review.QuotaExceeded(task(ledger.StateRunning), quota),
		"quota exceeded, never fits": review.QuotaExceeded(task(ledger.StateRunning), neverFits),
		"spend exhausted, nothing reserved": review.SpendExhausted(task(ledger.StateRunning),
			&spend.BudgetExhaustedError{Budget: spend.Budget{MaxTokens: 1000}, Wanted: spend.Reservation{Tokens: 1100}}),
	}
	for name, r := range reviews {
		cmds := testenv.ReviewCommands(r.SafeActions)
		if len(cmds) == 0 {
			t.Errorf("%s: no suggested command; the case proves nothing: %q", name, r.SafeActions)
			continue
		}
		if n := strings.Count(strings.Join(r.SafeActions, "\n"), "taskledger review"); n != len(cmds) {
			t.Errorf("%s: %d of %d commands are quoted for copying: %q", name, len(cmds), n, r.SafeActions)
		}
		for _, c := range cmds {
			if !strings.HasSuffix(c, " --park "+ledger.ParkMark) || strings.Count(c, "--park") != 1 {
				t.Errorf("%s: %q does not decide the park the item records (--park %s)", name, c, ledger.ParkMark)
			}
		}
	}
}
