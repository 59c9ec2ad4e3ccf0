package review

import (
	"fmt"
	"strings"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// Budget names accepted by BudgetExhausted (as reported by
// ledger.Task.BudgetLeft and ledger.NotClaimableError.Budget).
const (
	BudgetAttempts = "max_attempts"
	BudgetAge      = "max_age"
)

// MaxDetail caps error text quoted in a review item (bytes).
const MaxDetail = 300

// BudgetExhausted explains a task parked because its attempt budget
// (budget = "max_attempts") or age budget ("max_age") ran out. The wording
// depends on the state t was in: a running task whose lease expired or an
// unknown outcome leaves a possible side effect uncertain; a queued or
// retry_wait task had no attempt in flight.
func BudgetExhausted(t *ledger.Task, budget string) ledger.Review {
	id := t.TaskID
	var what string
	switch budget {
	case BudgetAge:
		what = fmt.Sprintf("was not finished within its %s age budget", humanDuration(time.Duration(t.MaxAgeMs)*time.Millisecond))
	default:
		budget = BudgetAttempts
		what = fmt.Sprintf("used %d of %d attempts without a result", t.Attempts, t.MaxAttempts)
	}
	inFlight := t.State == ledger.StateRunning || t.State == ledger.StateUnknown

	r := ledger.Review{Reason: ledger.ReviewBudgetExhausted}
	if inFlight {
		r.Summary = fmt.Sprintf("Task %s %s, and its last attempt may have reached the provider; retry it (accepting a possible duplicate generation) or resolve it as completed with evidence or as failed.", id, what)
	} else {
		r.Summary = fmt.Sprintf("Task %s %s; retry it with a fresh budget or resolve it as failed.", id, what)
	}

	r.Known = append(r.Known,
		fmt.Sprintf("budget exhausted: %s", budget),
		fmt.Sprintf("attempts used: %d of %d", t.Attempts, t.MaxAttempts),
		fmt.Sprintf("created at %s; age budget %s ended at %s", stamp(t.CreatedMs), humanDuration(time.Duration(t.MaxAgeMs)*time.Millisecond), stamp(t.DeadlineMs)),
		fmt.Sprintf("state when parked: %s", t.State),
	)
	r.Known = append(r.Known, lastError(t)...)
	if t.ProviderRef != "" {
		r.Known = append(r.Known, "provider reference: "+t.ProviderRef)
	}

	switch t.State {
	case ledger.StateRunning:
		r.Known = append(r.Known, fmt.Sprintf("attempt %d was leased to %q until %s and its worker stopped renewing the lease", t.Attempts, t.LeaseOwner, stamp(t.LeaseUntil)))
		r.Uncertain = append(r.Uncertain,
			fmt.Sprintf("whether attempt %d reached the provider and produced a result that was never saved", t.Attempts))
	case ledger.StateUnknown:
		r.Uncertain = append(r.Uncertain,
			fmt.Sprintf("whether the provider produced a result for operation %s around %s (the outcome was recorded as unknown)", t.OperationID(), stamp(t.UpdatedMs)))
	default:
		r.Known = append(r.Known, "no attempt was in flight when the task was parked, so nothing was generated and left unsaved")
		why := "whether another attempt would succeed"
		if t.ErrorClass != "" {
			why += " (earlier attempts ended with " + t.ErrorClass + ")"
		}
		r.Uncertain = append(r.Uncertain, why)
	}

	retry := "retry: `taskledger review retry " + id + "` re-queues the same task id with a fresh attempt and age budget"
	if inFlight {
		retry += ", accepting that the provider may generate a second time"
	}
	r.SafeActions = append(r.SafeActions, retry)
	if inFlight {
		r.SafeActions = append(r.SafeActions, resolveCompleted(id))
	}
	r.SafeActions = append(r.SafeActions, resolveFailed(id))
	return r
}

// UnknownOutcome explains a task whose attempt may have produced a result at
// the provider (around at) that cannot be read back. provider names the
// provider (may be empty); why says why no readback was possible (for
// example "the provider offers no readback", or a lookup error's text).
func UnknownOutcome(t *ledger.Task, provider string, at time.Time, why string) ledger.Review {
	id := t.TaskID
	when := at.UTC().Format(time.RFC3339)
	if provider == "" {
		provider = "the provider"
	}
	r := ledger.Review{Reason: ledger.ReviewUnknownOutcome}
	r.Summary = fmt.Sprintf("Task %s: the provider may have produced a result at %s; no readback is possible; safe: resolve as completed with evidence, or retry accepting a possible duplicate generation.", id, when)
	r.Known = append(r.Known,
		fmt.Sprintf("attempt %d of %d was sent to %s with operation id %s", t.Attempts, t.MaxAttempts, provider, t.OperationID()),
		fmt.Sprintf("its outcome was recorded as unknown at %s", when),
		"no readback: "+clip(why, MaxDetail),
	)
	r.Known = append(r.Known, lastError(t)...)
	r.Uncertain = append(r.Uncertain,
		fmt.Sprintf("whether %s performed (and billed) the generation for operation %s", provider, t.OperationID()),
		"if it did, its result is not saved in taskledger and cannot be fetched automatically",
	)
	r.SafeActions = append(r.SafeActions,
		resolveCompleted(id),
		"retry: `taskledger review retry "+id+"` re-queues the same task id with a fresh budget, accepting a possible duplicate generation",
		resolveFailed(id),
	)
	return r
}

// ProviderConfig explains a task parked because the provider rejected
// taskledger's configuration, credentials, permissions or model (a
// retrypolicy.PermanentConfig failure). err's text is the provider's short
// error (never a credential; adapters guarantee it).
func ProviderConfig(t *ledger.Task, err error) ledger.Review {
	id := t.TaskID
	msg := ""
	if err != nil {
		msg = clip(err.Error(), MaxDetail)
	}
	r := ledger.Review{Reason: ledger.ReviewProviderConfig, ErrorClass: "permanent_config", ErrorMessage: msg}
	r.Summary = fmt.Sprintf("Task %s was refused by the provider because of taskledger's configuration (credentials, permissions or model); fix the configuration, then retry it.", id)
	r.Known = append(r.Known,
		fmt.Sprintf("attempt %d of %d was refused by the provider", t.Attempts, t.MaxAttempts),
	)
	if msg != "" {
		r.Known = append(r.Known, "provider error: "+msg)
	}
	r.Known = append(r.Known, "a refused request performs no generation, so nothing was produced for this attempt")
	r.Uncertain = append(r.Uncertain,
		"which setting is wrong: the API key or secret, the IAM permissions, the model id or the endpoint",
	)
	r.SafeActions = append(r.SafeActions,
		"fix the provider configuration (secret, IAM policy, PROVIDER_MODEL, PROVIDER_BASE_URL), then `taskledger review retry "+id+"`",
		resolveFailed(id),
	)
	return r
}

// StaleLease explains a running task whose worker stopped renewing its
// lease while the step may have been in progress, when the step has side
// effects, the provider does not deduplicate by operation id, and no
// readback is available: it can be neither re-run safely nor resolved
// automatically.
func StaleLease(t *ledger.Task) ledger.Review {
	id := t.TaskID
	until := stamp(t.LeaseUntil)
	r := ledger.Review{Reason: ledger.ReviewStaleLease}
	r.Summary = fmt.Sprintf("Task %s was running on a worker that stopped renewing its lease at %s; the provider may have produced a result that was never saved; resolve it as completed with evidence, or retry accepting a possible duplicate generation.", id, until)
	r.Known = append(r.Known,
		fmt.Sprintf("attempt %d of %d was leased to %q until %s", t.Attempts, t.MaxAttempts, t.LeaseOwner, until),
		"the worker stopped heartbeating before saving a result",
		"the provider does not deduplicate by operation id, so re-running the step could generate twice",
	)
	r.Known = append(r.Known, lastError(t)...)
	r.Uncertain = append(r.Uncertain,
		fmt.Sprintf("whether attempt %d reached the provider (operation id %s) before the worker stopped", t.Attempts, t.OperationID()),
	)
	r.SafeActions = append(r.SafeActions,
		resolveCompleted(id),
		"retry: `taskledger review retry "+id+"` re-queues the same task id with a fresh budget, accepting a possible duplicate generation",
		resolveFailed(id),
	)
	return r
}

// Poison explains a dead-letter message that is not a task reference.
// msgID is the SQS message id; bodySHA and size describe the body (never
// stored itself); why is the parse error.
func Poison(msgID, bodySHA string, size int, why string) ledger.Review {
	why = clip(why, MaxDetail)
	r := ledger.Review{
		Reason:       ledger.ReviewPoisonMessage,
		MessageID:    msgID,
		BodySHA256:   bodySHA,
		BodyBytes:    size,
		ErrorClass:   ledger.ReviewPoisonMessage,
		ErrorMessage: why,
	}
	r.Summary = fmt.Sprintf("Message %s on the task dead-letter queue is not a task reference, so no task ran for it; find and fix its sender, then resolve this item.", msgID)
	r.Known = append(r.Known,
		fmt.Sprintf("body: %d bytes, SHA-256 %s (the body itself is not stored)", size, bodySHA),
		"rejected because: "+why,
		"no task was created, changed or run for this message",
	)
	r.Uncertain = append(r.Uncertain, "which client or process sent it")
	r.SafeActions = append(r.SafeActions,
		"fix the sender; task messages are exactly {\"task_id\":\"t_…\"}",
		"close the item: `taskledger review resolve "+ledger.PoisonID(msgID)+" --outcome failed --note \"<what you found>\"` (there is no task to retry)",
	)
	return r
}

func resolveCompleted(id string) string {
	return "resolve as completed: `taskledger review resolve " + id + " --outcome completed --note \"<evidence>\"` only with evidence from the provider (its console, logs or request id) that the generation succeeded"
}

func resolveFailed(id string) string {
	return "resolve as failed: `taskledger review resolve " + id + " --outcome failed --note \"<reason>\"` ends the task; the caller sees the note as its error"
}

func lastError(t *ledger.Task) []string {
	if t.ErrorClass == "" {
		return nil
	}
	s := "last error class: " + t.ErrorClass
	if t.ErrorMessage != "" {
		s += " (" + clip(t.ErrorMessage, MaxDetail) + ")"
	}
	return []string{s}
}

func stamp(ms int64) string {
	if ms <= 0 {
		return "(unknown time)"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

// humanDuration renders 1h0m0s as "1h", 90s as "1m30s".
func humanDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
