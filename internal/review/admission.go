package review

import (
	"fmt"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// AdmissionRefused explains a task parked because provider admission
// (internal/admission) can never admit its call: the model has no
// configured limits, or the call's token estimate exceeds the model's
// per-minute token limit. detail is the admission error's text (model id
// and numbers, never task text). No provider call was made.
func AdmissionRefused(t *ledger.Task, model, detail string) ledger.Review {
	id := t.TaskID
	r := ledger.Review{Reason: ledger.ReviewProviderConfig, ErrorClass: "admission_config", ErrorMessage: clip(detail, MaxDetail)}
	r.Summary = fmt.Sprintf("Task %s can never be admitted to model %q under the configured provider admission limits, so no call was made; raise the limits (PROVIDER_ADMISSION) or lower the task's max_tokens, then retry it.", id, model)
	r.Known = append(r.Known,
		"admission refused the call for good: "+clip(detail, MaxDetail),
		fmt.Sprintf("attempt %d of %d was given a claim but the provider was not called: nothing was generated or billed", t.Attempts, t.MaxAttempts),
		fmt.Sprintf("no result is saved; a retry keeps the task id and operation id %s", t.OperationID()),
	)
	r.Uncertain = append(r.Uncertain,
		"whether the limit or the task's requested max_tokens is what should change",
	)
	r.SafeActions = append(r.SafeActions,
		"fix PROVIDER_ADMISSION (the template's ProviderAdmission parameter) so the model's tokens_per_minute covers the estimate, then "+retryCmd(id),
		resolveFailed(id),
	)
	return r
}
