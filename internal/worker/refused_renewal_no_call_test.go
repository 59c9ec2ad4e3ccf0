package worker_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRefusedRenewalGivesTheTaskBackAsNoCall: when leaseForCall's renewal
// is refused because the reconciler already expired the lease to unknown
// at this assignment, the worker makes no call — and knows it. record.go:
// "the uncertainty is void". Left unknown, with a provider without readback
// (Bedrock-like: no idempotency, no Lookup) the reconciler would park the
// task unknown_outcome, and the review would tell the operator as a KNOWN
// fact that its worker recorded the call as starting, then its lease
// expired, and list as uncertain whether the provider "performed
// (and billed) the generation" — while no call was ever made (DESIGN
// §1.4/§1.6), with "resolve as completed with evidence" (there is none),
// "retry accepting a possible duplicate" or "resolve failed" as the safe
// actions for a task that needed nothing but a retry.
//
// Sequence (lease 30 s, Grace 5 s, C = the claim): the call-start mark's
// reply is lost and so is its first recognising read (17.5 s each, C+35);
// while the second read's reply is on its way the reconciler (C+36) finds
// the claim's lease 6 s past its end with the call marked: unknown. The
// worker sees its mark applied, under lease/3 left: leaseForCall renews,
// the renewal is refused (unknown at this version), no call.
//
// So the worker gives the assignment back from unknown
// (ledger.ReleaseUnknown: queued, its attempt given back, error
// call_not_started) — or, when the reconciler parked it first (parked),
// resolves the park and releases it (ledger.ReleaseLapsed), giving the
// attempt back too: with one attempt, a park resolved as a retry that kept
// the attempt would end budget_exhausted without a call. The next delivery
// makes the one call.
func TestRefusedRenewalGivesTheTaskBackAsNoCall(t *testing.T) {
	t.Parallel()
	eachParked(t, func(t *testing.T, parked bool) {
		testenv.Each(t, func(t *testing.T, e *testenv.Env) {
			noCallAfterExpiry(t, e, "refused-renewal", parked, func(b *bundle, task *ledger.Task, expire func(time.Duration)) {
				inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
					if c.TaskID != task.TaskID {
						return ""
					}
					switch {
					case c.Key() == "DynamoDB.UpdateItem" && c.N == 2: // 1: claim, 2: the mark
						return faultinject.LostReply
					case c.Key() == "DynamoDB.GetItem" && c.N == 1: // the mark's first recognising read
						return faultinject.LostReply
					}
					return ""
				})
				inj.OnInject = func(c faultinject.Call, k faultinject.Kind) {
					if c.TaskID == task.TaskID && k == faultinject.LostReply {
						b.clock.Advance(17500 * time.Millisecond) // a request that hung until its timeout
					}
				}
				inj.OnResult = func(c faultinject.Call, params, result any, err error) {
					if c.TaskID == task.TaskID && c.Key() == "DynamoDB.GetItem" && c.N == 2 && err == nil {
						// The mark's second read was served; while its reply
						// is on the way, the reconciler runs (the worker's
						// goroutine waits here).
						expire(time.Second)
					}
				}
			})
		})
	})
}
