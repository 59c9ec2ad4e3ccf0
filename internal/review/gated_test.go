package review_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A task with an approval gate completes only through an approval
// (ledger.Act refuses "completed"), so no review of one may summarise or
// offer resolving it as completed: every builder that offers that for an
// ungated task is checked, in each of its wordings, against a gated one.
func TestReviewsOfAGatedTaskNeverOfferTheRefusedCompletion(t *testing.T) {
	at := time.Date(2025, 3, 1, 10, 30, 0, 0, time.UTC)
	f := review.Failure{Class: "unknown_outcome", Message: "reply lost"}
	x := review.Result{ResultBytes: 500 * 1024, ProviderRef: "ref-1"}
	builds := map[string]func(t *ledger.Task) ledger.Review{
		"unknown outcome":    func(t *ledger.Task) ledger.Review { return review.UnknownOutcome(t, "bedrock", at, "no readback") },
		"budget, lease lost": func(t *ledger.Task) ledger.Review { return review.BudgetExhausted(t, review.BudgetAttempts) },
		"budget, unknown attempt ended": func(t *ledger.Task) ledger.Review {
			return review.BudgetExhaustedAfter(t, review.BudgetAttempts, f, time.Time{})
		},
		"stale lease":      func(t *ledger.Task) ledger.Review { return review.StaleLease(t) },
		"result too large": func(t *ledger.Task) ledger.Review { return review.ResultTooLarge(t, x) },
		"result not saved": func(t *ledger.Task) ledger.Review { return review.ResultNotSaved(t, x, errors.New("throttled")) },
		"result not saved (readback)": func(t *ledger.Task) ledger.Review {
			y := x
			y.FromReadback = true
			return review.ResultNotSaved(t, y, errors.New("throttled"))
		},
		"cancelled while running": func(t *ledger.Task) ledger.Review {
			t.State, t.AssignmentVersion, t.CancelVersion = ledger.StateUnknown, 3, 2
			return review.UnknownOutcome(t, "bedrock", at, "no readback")
		},
	}
	for name, build := range builds {
		plain, gate := task(ledger.StateRunning), task(ledger.StateRunning)
		gate.ApprovalRequired = true
		offered := func(r ledger.Review) bool {
			s := strings.ToLower(r.Summary + "\n" + strings.Join(r.SafeActions, "\n"))
			return strings.Contains(s, "as completed") || strings.Contains(s, "--outcome completed") || strings.Contains(s, "with evidence")
		}
		if !offered(build(plain)) {
			t.Errorf("%s: the ungated review offers no completion; the case proves nothing", name)
			continue
		}
		r := build(gate)
		if offered(r) {
			t.Errorf("%s: a gated task's review offers resolving it as completed, which the ledger refuses:\nsummary %q\nsafe %q", name, r.Summary, r.SafeActions)
		}
		if len(r.SafeActions) == 0 || !strings.Contains(strings.Join(r.Known, "\n"), "approval gate") {
			t.Errorf("%s: safe actions %q, known %q; want some, and the gate named", name, r.SafeActions, r.Known)
		}
	}
}
