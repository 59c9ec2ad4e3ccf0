package review

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// DeliveryUnknownOutcome describes a deliver task (DESIGN §10) whose
// destination may have acted and which cannot be settled automatically: the
// destination has no readback, or its readback never showed the delivery and
// its "not found" is not credible, and it does not deduplicate by operation
// id — so taskledger never sends it again on its own. why says what the
// readback found; guarantees is the destination's declaration.
func DeliveryUnknownOutcome(t *ledger.Task, dest, guarantees string, at time.Time, why string) ledger.Review {
	id := t.TaskID
	when := at.UTC().Format(time.RFC3339)
	if dest == "" {
		dest = "the destination"
	}
	r := ledger.Review{Reason: ledger.ReviewUnknownOutcome}
	r.Summary = fmt.Sprintf("Task %s: destination %s may have performed the delivery at %s and it could not be confirmed; it is not sent again automatically; safe: check the destination for operation id %s, then resolve as completed (delivered) or failed (not delivered).", id, dest, when, t.OperationID())
	r.Known = append(r.Known,
		sentLine(t, dest),
		fmt.Sprintf("its outcome was recorded as unknown at %s", when),
		"readback: "+clip(why, MaxDetail),
		"the destination declares "+guarantees,
	)
	if in, err := destination.ParseDeliverInput(json.RawMessage(t.Input)); err == nil {
		r.Known = append(r.Known, "payload sha256 "+destination.HashPayload(in.Payload)+" (the delivered payload's hash, as the destination received it and a receipt shows it)")
	}
	r.Known = append(r.Known, lastError(t)...)
	r.Uncertain = append(r.Uncertain,
		fmt.Sprintf("whether %s performed the delivery for operation %s", dest, t.OperationID()),
		"if it did, a second send would deliver it twice: the destination does not deduplicate by operation id",
	)
	r.SafeActions = append(r.SafeActions,
		"resolve as completed: "+resolveCmd(id, ledger.ResolutionCompleted, "<evidence>")+" only with evidence from the destination (its record, log or reference for operation "+t.OperationID()+") that the delivery arrived",
		"resolve as failed: "+resolveCmd(id, ledger.ResolutionFailed, "<reason>")+" ends the task without delivering; only when the destination shows it never arrived",
		"retry: "+retryCmd(id)+" re-sends the delivery with the same operation id; only when the destination shows it never arrived",
	)
	return r
}

// ReasonDestinationConfig is the review reason of a deliver task whose
// destination refused taskledger's configuration: the destination is not
// configured (any more), its endpoint, secret or permission is wrong.
const ReasonDestinationConfig = "destination_config"

// DestinationConfig describes a deliver task parked because its
// destination refused the configuration (retrypolicy.Misconfigured: an
// unknown destination, a webhook's 401/403/404/410 or redirect, an
// EventBridge authorisation or not-found error). Such a refusal comes
// before the destination acts.
func DestinationConfig(t *ledger.Task, dest string, f Failure) ledger.Review {
	id := t.TaskID
	if dest == "" {
		dest = "the destination"
	}
	r := ledger.Review{Reason: ReasonDestinationConfig, ErrorClass: f.Class, ErrorMessage: f.Message}
	r.Summary = fmt.Sprintf("Task %s was refused by destination %s because of taskledger's configuration (destination, endpoint, secret or permission), so nothing was delivered; fix the configuration, then retry it.", id, dest)
	r.Known = append(r.Known,
		fmt.Sprintf("attempt %d of %d was refused by destination %s with %s", t.Attempts, t.MaxAttempts, dest, f.describe()),
	)
	if f.Message != "" {
		r.Known = append(r.Known, "destination error: "+clip(f.Message, MaxDetail))
	}
	r.Known = append(r.Known,
		"a configuration refusal comes before the destination acts: nothing was delivered by this attempt",
		fmt.Sprintf("a retry keeps the task id and operation id %s (the destination sees the same operation)", t.OperationID()),
	)
	r.Uncertain = append(r.Uncertain,
		"which setting is wrong: the destination's entry in TASKLEDGER_DESTINATIONS, the endpoint URL, its signing secret, the Lambda function, the SES sender identity, or the IAM permissions",
	)
	r.SafeActions = append(r.SafeActions,
		"fix the destination configuration (TASKLEDGER_DESTINATIONS, DeliveryWebhookSecretArns, the secret's value, DeliveryLambdaFunctionArns, DeliveryEmailIdentity), then "+retryCmd(id),
		"resolve as failed: "+resolveCmd(id, ledger.ResolutionFailed, "<reason>")+" ends the task without delivering",
	)
	return r
}
