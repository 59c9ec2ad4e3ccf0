package review

import (
	"fmt"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// ApprovalExpired explains a task whose approval deadline passed while it
// awaited a person's decision (DESIGN §10): its result is saved, nothing
// was delivered, and nothing will be unless a person acts.
func ApprovalExpired(t *ledger.Task) ledger.Review {
	id := t.TaskID
	deadline := stamp(t.ApprovalDeadlineMs)
	r := ledger.Review{Reason: ledger.ReviewApprovalExpired}
	r.Summary = fmt.Sprintf("Task %s waited for approval until its deadline %s and nobody decided; its result is saved and nothing was delivered; end it, or submit a regenerate to ask again.", id, deadline)
	r.Known = append(r.Known,
		fmt.Sprintf("the result was generated and saved (result_sha256 %s)", t.ResultSHA256),
		fmt.Sprintf("the approval deadline was %s", deadline),
		"no delivery of this task was created: deliveries are created only by an approval",
	)
	if n := len(t.WithdrawnDeliveryIDs); n > 0 {
		r.Known = append(r.Known, fmt.Sprintf("an earlier approval was withdrawn before its %d deliveries started; they are cancelled", n))
	}
	r.SafeActions = append(r.SafeActions,
		resolveFailed(id)+"; nothing is delivered",
		"ask again: "+retryCmd(id)+" generates the result again under the same task id, which then awaits approval anew (the provider is called again)",
	)
	return r
}
