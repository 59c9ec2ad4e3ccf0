package api_test

import (
	"net/http"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
)

// A retried direct deliver (same caller, same Idempotency-Key, same
// payload: a lost reply) is answered with the task it recorded — 200,
// Idempotent-Replayed — even when the caller may no longer submit one
// directly: the permission changed between the first submit and the retry
// (a deploy moved DirectDeliver from Anyone to ApproversOnly, or the
// approver's token no longer carries the group). The direct-deliver 403
// says "Nothing was written", yet the delivery is recorded and will go
// out: a client that believes it would make the delivery another way, and
// the receiver gets it twice (DESIGN §1.2; the quota and the provider
// refusals already let a recorded key through, see Handler.recorded).
func TestRetriedDirectDeliverIsAnsweredWithItsTaskAfterThePermissionChanged(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, jwtApprovers(t, api.DirectDeliverAnyone))

		// Bob, no approver, submits while the deployment lets anyone.
		first := b.do(t, submitReq("order-4711", deliverBody(directNotify), asJWT("bob")))
		wantStatus(t, first, http.StatusAccepted)
		bobTask := view(t, first).TaskID
		// Carol submits as an approver.
		first = b.do(t, submitReq("order-4712", deliverBody(directNotify), carolApprover))
		wantStatus(t, first, http.StatusAccepted)
		carolTask := view(t, first).TaskID
		before := len(scanTasks(t, e))

		// The deployment now lets only approvers deliver directly.
		b.h.DirectDeliver = api.DirectDeliverApproversOnly
		for _, c := range []struct {
			who, key, task string
			as             reqOpt
		}{
			{"bob after the setting changed", "order-4711", bobTask, asJWT("bob")},
			{"carol without the approvers group", "order-4712", carolTask, asJWT("carol")},
		} {
			resp := b.do(t, submitReq(c.key, deliverBody(directNotify), c.as))
			if resp.StatusCode != http.StatusOK || resp.Headers[api.HeaderIdempotentReplayed] != "true" || view(t, resp).TaskID != c.task {
				t.Errorf("%s retries %s (its task %s is recorded and will be delivered): %d %s; want 200, Idempotent-Replayed, the recorded task",
					c.who, c.key, c.task, resp.StatusCode, resp.Body)
			}
		}
		// A new key is still refused, and nothing was written by the retries.
		wantProblem(t, b.do(t, submitReq("order-4713", deliverBody(directNotify), asJWT("bob"))), http.StatusForbidden, api.TypeDirectDeliverForbidden)
		if n := len(scanTasks(t, e)); n != before {
			t.Fatalf("%d tasks after the retries, %d before", n, before)
		}
	})
}
