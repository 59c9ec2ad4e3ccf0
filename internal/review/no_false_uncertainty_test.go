package review

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

func saysMayHave(r ledger.Review) bool {
	return strings.Contains(strings.ToLower(r.Summary+"\n"+strings.Join(r.Uncertain, "\n")), "may have")
}

// A lapsed lease whose readback by operation id found nothing: the lease's
// own "may have acted" error is not an earlier uncertain attempt, and the
// readback covers every attempt (they share the operation id), so the
// review claims no uncertainty.
func TestReadBackAbsentAfterALapsedLeaseClaimsNoUncertainty(t *testing.T) {
	task := &ledger.Task{TaskID: "t_1", State: ledger.StateUnknown, Attempts: 3, MaxAttempts: 3,
		ErrorClass: "unknown_outcome", ErrorMessage: ledger.LeaseExpiredMessage}
	r := BudgetExhaustedReadBackAbsent(task, BudgetAge)
	if saysMayHave(r) {
		t.Fatalf("review says the provider may have acted after a readback found nothing:\n%s\n%v", r.Summary, r.Uncertain)
	}
	if !strings.Contains(r.Summary, "nothing was generated") {
		t.Errorf("summary %q does not say nothing was generated", r.Summary)
	}
}

// A retry-safe generation out of budget is parked without the words a
// person would read as "weigh a duplicate": repeating it is the policy.
func TestRetrySafeBudgetParkClaimsNoUncertainty(t *testing.T) {
	for _, st := range []ledger.State{ledger.StateRunning, ledger.StateUnknown} {
		task := &ledger.Task{TaskID: "t_2", State: st, Attempts: 5, MaxAttempts: 5, ErrorClass: "unknown_outcome", ErrorMessage: ledger.LeaseExpiredMessage}
		r := BudgetExhaustedAfterClass(task, BudgetAttempts, Failure{}, time.Time{}, true)
		if saysMayHave(r) {
			t.Errorf("%s: review of a retry-safe park says may have:\n%s\n%v", st, r.Summary, r.Uncertain)
		}
		if !strings.Contains(r.Summary, "retry-safe") || r.Reason != ledger.ReviewBudgetExhausted {
			t.Errorf("%s: review %q (%s) does not name the retry-safe policy", st, r.Summary, r.Reason)
		}
		for _, a := range r.SafeActions {
			if strings.Contains(a, "resolve") && strings.Contains(a, "completed") {
				t.Errorf("%s: offers resolving as completed with nothing to show for it: %q", st, a)
			}
		}
	}
}

// Nor the opposite: a retry-safe generation's calls are not marked and its
// uncertain attempts are retried, so an attempt whose reply was lost may
// have generated a result nobody saved; its review does not claim that
// nothing was generated.
func TestRetrySafeBudgetParkClaimsNoCertaintyEither(t *testing.T) {
	for _, st := range []ledger.State{ledger.StateRunning, ledger.StateRetryWait, ledger.StateQueued} {
		task := &ledger.Task{TaskID: "t_3", State: st, Attempts: 3, MaxAttempts: 3, ErrorClass: "throttled"}
		r := BudgetExhaustedAfterClass(task, BudgetAttempts, Failure{}, time.Time{}, true)
		if text := r.Summary + "\n" + strings.Join(r.Known, "\n"); strings.Contains(text, "nothing was generated") {
			t.Errorf("%s: review of a retry-safe park says nothing was generated:\n%s", st, text)
		}
	}
}
