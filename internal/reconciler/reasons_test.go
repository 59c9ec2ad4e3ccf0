package reconciler_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestMetricsOpenReviewsByReason: the run counts open review items per
// reason and writes one EMF record per reason (dimension Reason), which the
// CloudWatch dashboard's "open reviews by reason" widget reads.
func TestMetricsOpenReviewsByReason(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		for _, k := range []string{"r-1", "r-2"} {
			c := claim(t, b, create(t, b, k).TaskID)
			if _, err := b.l.Park(ctx, c, ledger.ParkOptions{State: c.State, Version: c.AssignmentVersion}, review.BudgetExhausted(c, review.BudgetAttempts)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.l.PutPoison(ctx, review.Poison("m-1", strings.Repeat("0", 64), 3, "not JSON")); err != nil {
			t.Fatal(err)
		}
		s := handle(t, b.handler())
		if s.OpenReviews != 3 || s.OpenReviewsByReason[ledger.ReviewBudgetExhausted] != 2 || s.OpenReviewsByReason[ledger.ReviewPoisonMessage] != 1 {
			t.Fatalf("open reviews = %d by reason %v, want 3: 2 budget_exhausted, 1 poison_message", s.OpenReviews, s.OpenReviewsByReason)
		}
		got := map[string]float64{}
		for _, line := range strings.Split(strings.TrimSpace(b.emf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("EMF line %q: %v", line, err)
			}
			if reason, ok := m["Reason"].(string); ok {
				got[reason], _ = m["OpenReviews"].(float64)
			}
		}
		if len(got) != 2 || got[ledger.ReviewBudgetExhausted] != 2 || got[ledger.ReviewPoisonMessage] != 1 {
			t.Fatalf("EMF OpenReviews by Reason = %v", got)
		}
	})
}
