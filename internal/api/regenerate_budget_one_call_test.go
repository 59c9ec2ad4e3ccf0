package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestRegenerateBudgetThatCannotCoverOneCallIsRefused: a submit whose
// token budget cannot cover one provider call is refused 400
// (budgetCoversOneCall), and so is a regenerate with a new, longer input
// under the inherited chain budget — accepted, it could only ever be
// parked budget_exhausted by the worker. Bad input gets a clear error and
// changes nothing.
func TestRegenerateBudgetThatCannotCoverOneCallIsRefused(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now())
		b := setup(t, e, withSpend(e, clock, nil))
		// One call of prompt "p" with max_tokens 100 reserves 1 + 32 + 100 = 133.
		root := view(t, b.do(t, submitReq("regen-budget-root", budgetBody("p", `{"max_total_tokens":133}`))))
		before := len(scanTasks(t, e))
		long := strings.Repeat("x", 500)
		resp := b.do(t, regenReq(root.TaskID, "regen-budget-regen", `{"input":{"prompt":"`+long+`","max_tokens":100}}`))
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("regenerate reserving %d tokens per call under a chain budget of 133: status %d, want 400 %s naming budget.max_total_tokens",
				500+32+100, resp.StatusCode, api.TypeInvalidBody)
		}
		if n := len(scanTasks(t, e)); n != before {
			t.Fatalf("%d items written by a refused regenerate", n-before)
		}
	})
}
