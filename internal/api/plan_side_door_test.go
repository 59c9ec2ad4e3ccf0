package api_test

import (
	"net/http"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
)

// A plan without approval delivers its task's result with no approver in
// between, so it is a direct delivery by another door: where a caller may
// not submit {"kind":"deliver"} (an approver claim and ApproversOnly, or
// Disabled), a generate task with an ungated "deliver" plan is refused the
// same way — 403, nothing written — or a caller refused at Approve could
// have the same artifact sent to the same destination by dropping
// "approval":{"required":true} from the plan.
func TestUngatedPlanNeedsTheDirectDeliverPermission(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		for _, dd := range []api.DirectDeliver{api.DirectDeliverApproversOnly, api.DirectDeliverDisabled} {
			b := setup(t, e, jwtApprovers(t, dd))
			key := "ungated-bob-" + string(dd)
			resp := b.do(t, submitReq(key, ungatedPlan, asJWT("bob")))
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("DirectDeliver=%s: a non-approver's ungated plan answered %d %s, want 403 %s", dd, resp.StatusCode, resp.Body, api.TypeDirectDeliverForbidden)
				continue
			}
			wantProblem(t, resp, http.StatusForbidden, api.TypeDirectDeliverForbidden)
			wantNothingWritten(t, e, key)
		}
	})
}
