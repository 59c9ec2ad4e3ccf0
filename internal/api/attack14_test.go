package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestAttack14RegenerateBudgetCannotCoverOneCall (adversarial review of
// issue 14): a submit whose token budget cannot cover one provider call is
// refused 400 (budgetCoversOneCall), but a regenerate with a new, longer
// input under the inherited chain budget is not checked: it is accepted
// (202, a task and an outbox message written) and can only ever be parked
// budget_exhausted by the worker. Bad input must get a clear error and
// change nothing. Smallest fix: in regenerate, when the parent has a token
// budget, run budgetCoversOneCall on the regenerate's input against it
// (after parseRegenerate, before create).
func TestAttack14RegenerateBudgetCannotCoverOneCall(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now())
		b := setup(t, e, withSpend(e, clock, nil))
		// One call of prompt "p" with max_tokens 100 reserves 1 + 32 + 100 = 133.
		root := view(t, b.do(t, submitReq("atk14-root", budgetBody("p", `{"max_total_tokens":133}`))))
		before := len(scanTasks(t, e))
		long := strings.Repeat("x", 500)
		resp := b.do(t, regenReq(root.TaskID, "atk14-regen", `{"input":{"prompt":"`+long+`","max_tokens":100}}`))
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("regenerate reserving %d tokens per call under a chain budget of 133: status %d, want 400 %s naming budget.max_total_tokens",
				500+32+100, resp.StatusCode, api.TypeInvalidBody)
		}
		if n := len(scanTasks(t, e)); n != before {
			t.Fatalf("%d items written by a refused regenerate", n-before)
		}
	})
}
