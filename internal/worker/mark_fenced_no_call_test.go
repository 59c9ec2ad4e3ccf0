package worker_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestFencedMarkRepeatGivesTheTaskBackAsNoCall: "a worker that makes no
// call gives the task back from unknown too (ledger.ReleaseUnknown) or
// resolves its unknown_outcome park as a retry". That holds on a no-call
// path that does not reach Handler.release as well: a repeat of the
// call-start mark that is fenced because the reconciler expired this very
// assignment to unknown is handed to uncalled, not acknowledged as
// "fenced".
//
// Sequence (lease 30 s, Grace 5 s, C = the claim; provider without
// idempotency or readback, Bedrock-like):
//
//	C+0   claim (lease to C+30); the call-start mark is applied (its lease
//	      is fresh enough, nothing renewed) but its reply is lost — a
//	      request that hung until its timeout;
//	C+40  meanwhile the reconciler finds the lease 10 s past its end with
//	      the call marked at this version: ExpireToUnknown (a new
//	      write_nonce);
//	      the worker's read that would recognise the mark sees another
//	      nonce: not recognised; save repeats the mark, which is refused
//	      (unknown at this version: not_running). No provider call.
//	later without the hand-over, the reconciler (no readback) would park it
//	      unknown_outcome, telling the operator as a known fact that its
//	      call was started.
//
// The "parked" variant lets the reconciler park before the worker's read;
// the worker resolves that park as well (RetryLapsed).
//
// DESIGN §1.4/§1.6: an attempt the worker knows made no call is not left
// uncertain, and no review states a started call as known, with "retry
// accepting a possible duplicate" among the operator's actions.
func TestFencedMarkRepeatGivesTheTaskBackAsNoCall(t *testing.T) {
	t.Parallel()
	eachParked(t, func(t *testing.T, parked bool) {
		testenv.Each(t, func(t *testing.T, e *testenv.Env) {
			noCallAfterExpiry(t, e, "mark-fenced", parked, func(b *bundle, task *ledger.Task, expire func(time.Duration)) {
				// The mark's reply is lost and the SDK sends it again
				// (Replayer): the first send is applied, the second meets
				// what happened in between. Nothing else is faulted.
				var updates int
				rep := &faultinject.Replayer{Decide: func(c faultinject.Call, _ any) bool {
					if c.TaskID != task.TaskID || c.Key() != "DynamoDB.UpdateItem" {
						return false
					}
					updates++
					return updates == 2 // 1: claim, 2: the mark
				}}
				inj := faultinject.New(nil)
				inj.OnResult = func(c faultinject.Call, params, result any, err error) {
					if c.TaskID == task.TaskID && c.Key() == "DynamoDB.UpdateItem" && c.N == 2 && err == nil {
						// The mark's first send was applied; its reply is lost
						// and the request hangs until the SDK's timeout.
						expire(40 * time.Second)
					}
				}
				cfg := b.e.AWS.Copy()
				cfg.APIOptions = append(cfg.APIOptions, rep.Register, inj.Register)
				fl, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
				if err != nil {
					t.Fatal(err)
				}
				b.h.Ledger = fl
			})
		})
	})
}
