package templatetest

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestPayloadsOutliveAnApprovalWait (the claim-check paths): the payload
// bucket's lifecycle keeps an object "at least as long as the task item
// that may reference it". A task with an approval gate references its
// objects longest: the worker writes results/<task>/<created_ms>/<version>
// when the task enters awaiting_approval, and the task waits there up to
// api.MaxApprovalSeconds (30 days) before it is completed and then kept
// ledger.DefaultRetention (7 days). So results/, inputs/ and the catch-all
// rule keep objects for that whole life plus a day; a shorter rule would
// mean that:
//   - POST /tasks/{id}/approve of an offloaded result reads a deleted
//     object (offloadedResult → ErrNotFound → 500, on every retry): the
//     generated artifact is lost while the task is live, and the task can
//     only expire approval_expired;
//   - GET /tasks/{id} of that task, awaiting or approved, cannot show it;
//   - POST /tasks/{id}/regenerate of a task approved late reads its
//     parent's offloaded input from inputs/<sha256> (inputOf), written at
//     submit and already gone (500).
//
// TestPayloadBucket, its sibling, checks the rest of the bucket.
func TestPayloadsOutliveAnApprovalWait(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	b, _ := tpl.Resource("PayloadBucket")
	expires := map[string]int{}
	for _, r := range listOf(dig(b, "LifecycleConfiguration", "Rules")) {
		prefix, _ := dig(r, "Prefix").(string)
		if d, ok := dig(r, "ExpirationInDays").(int); ok {
			expires[prefix] = d
		}
	}
	// The longest a task item may still reference an object written when
	// the task entered awaiting_approval (results/) or at submit (inputs/).
	need := time.Duration(api.MaxApprovalSeconds)*time.Second + ledger.DefaultRetention
	needDays := int((need+24*time.Hour-1)/(24*time.Hour)) + 1
	for _, c := range []struct{ prefix, why string }{
		{"results/", "an approval's offloaded result (approve, the task view)"},
		{"inputs/", "an approved task's offloaded input (regenerate reads its parent's)"},
		{"", "the catch-all rule, which also deletes results/ and inputs/"},
	} {
		d, ok := expires[c.prefix]
		if !ok {
			continue
		}
		if d < needDays {
			t.Errorf("prefix %q expires after %d days, but %s is still referenced up to %d days after it was written (approval up to %d days + retention %s)",
				c.prefix, d, c.why, needDays, api.MaxApprovalSeconds/(24*3600), ledger.DefaultRetention)
		}
	}
}
