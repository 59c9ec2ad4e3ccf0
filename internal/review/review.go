package review

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Budget names accepted by BudgetExhausted (as reported by
// ledger.Task.BudgetLeft and ledger.NotClaimableError.Budget).
const (
	BudgetAttempts = "max_attempts"
	BudgetAge      = "max_age"
)

// MaxDetail caps error text quoted in a review item (bytes).
const MaxDetail = 300

// maxCorrelationID caps a poison message's correlation id (bytes).
const maxCorrelationID = 128

var unknownOutcome = retrypolicy.UnknownOutcome.String()

// Failure is how the attempt that just ended failed, as retrypolicy
// classified it: classes, reasons, codes and the provider's short error
// text, never task input or results.
type Failure struct {
	// Class is the retrypolicy class name ("transient", "permanent_config", …).
	Class string
	// Reason is the classifier's short reason ("http_429", "dial_error", …).
	Reason string
	// HTTPStatus is the provider's HTTP status code, 0 if there was none.
	HTTPStatus int
	// Message is the error text stored for the caller (ids, codes and the
	// provider's short text; adapters guarantee no credential or task text).
	// It becomes the review item's error_message; Known quotes it clipped to
	// MaxDetail.
	Message string
}

// FailureOf describes err, classified as c; msg is the error text stored
// for the caller. The HTTP status is found in err's chain (a
// *retrypolicy.StatusError, or any error with an HTTPStatusCode() int
// method, such as the AWS SDK's).
func FailureOf(c retrypolicy.Classification, err error, msg string) Failure {
	f := Failure{Reason: c.Reason, HTTPStatus: httpStatus(err), Message: msg}
	if c.Class != 0 {
		f.Class = c.Class.String()
	}
	return f
}

// detail is the failure's reason and status without the class: "HTTP 429",
// "aws_AccessDeniedException, HTTP 403", "dial_error", or "".
func (f Failure) detail() string {
	var parts []string
	if f.Reason != "" && !strings.HasPrefix(f.Reason, "steered_") && (f.HTTPStatus == 0 || f.Reason != fmt.Sprintf("http_%d", f.HTTPStatus)) {
		parts = append(parts, f.Reason)
	}
	if f.HTTPStatus != 0 {
		parts = append(parts, fmt.Sprintf("HTTP %d", f.HTTPStatus))
	}
	return strings.Join(parts, ", ")
}

// describe is "HTTP 429 (transient)", or "a transient error" with no detail.
func (f Failure) describe() string {
	class := f.Class
	if class == "" {
		class = "unclassified"
	}
	if d := f.detail(); d != "" {
		return d + " (" + class + ")"
	}
	return "a " + class + " error"
}

// BudgetExhausted explains a task found with its attempt budget
// (budget = "max_attempts") or age budget ("max_age") gone, by the
// reconciler or at a claim. The wording depends on the state t was in: a
// running task whose lease expired or an unknown outcome leaves a possible
// side effect uncertain (as does an earlier attempt recorded as
// unknown_outcome); a queued or retry_wait task had no attempt in flight.
func BudgetExhausted(t *ledger.Task, budget string) ledger.Review {
	return BudgetExhaustedAfter(t, budget, Failure{}, time.Time{})
}

// BudgetExhaustedAfter is [BudgetExhausted] for a worker that parks a task
// as its attempt ends: f is how that attempt failed (the zero Failure when
// no attempt just ended: the task's stored error is quoted then), and
// nextAttempt, when not zero, is the earliest time the next attempt could
// have started (backoff and any Retry-After), which the age budget's end
// ruled out. With a Failure the review's error class and message are f's.
func BudgetExhaustedAfter(t *ledger.Task, budget string, f Failure, nextAttempt time.Time) ledger.Review {
	return budgetExhausted(t, budget, f, nextAttempt, false, false)
}

// BudgetExhaustedAfterClass is [BudgetExhaustedAfter] worded for the
// task's effect class. For a retry-safe generation (retrySafe) an uncertain
// attempt was retried by policy, not left for a person to weigh, and
// whether the last attempt called the provider matters only for its cost,
// which was charged: the review says that, and never that the provider may
// have acted.
func BudgetExhaustedAfterClass(t *ledger.Task, budget string, f Failure, nextAttempt time.Time, retrySafe bool) ledger.Review {
	return budgetExhausted(t, budget, f, nextAttempt, false, retrySafe)
}

// BudgetExhaustedNoCall is [BudgetExhausted] for a running task whose lease
// expired with no call-start mark at its assignment version
// (ledger.MarkCallStarted, written before every call to a provider that
// does not deduplicate): its worker stopped after the claim
// and before starting a provider call, so nothing is uncertain about it.
func BudgetExhaustedNoCall(t *ledger.Task, budget string) ledger.Review {
	return budgetExhausted(t, budget, Failure{}, time.Time{}, true, false)
}

// BudgetExhaustedReadBackAbsent is [BudgetExhausted] for a task in unknown
// whose provider readback credibly found no record of the operation
// (contract.ErrNotFound): nothing was generated, so nothing is uncertain.
func BudgetExhaustedReadBackAbsent(t *ledger.Task, budget string) ledger.Review {
	return budgetExhausted(t, budget, Failure{}, time.Time{}, true, false)
}

// BudgetExhaustedCallMayRun is [BudgetExhausted] for an unknown task
// whose readback found nothing while a call of its fenced assignment could
// still reach the provider, until until (its lease's end plus the call
// timeout): "not found" then proves nothing, and the age budget leaves no
// time to wait for it to.
func BudgetExhaustedCallMayRun(t *ledger.Task, budget string, until time.Time) ledger.Review {
	r := BudgetExhausted(t, budget)
	r.Known = append(r.Known, fmt.Sprintf("the provider's readback of operation id %s found no record, but a call of an attempt whose outcome is open, if its worker started one, could still reach the provider until %s (its lease's end plus the call timeout), past the age budget's end", t.OperationID(), stamp(until.UnixMilli())))
	return r
}

// uncertainAttempt names the attempt an unknown task's outcome is open
// for: its last, unless that one ended with an error of its own (not
// unknown_outcome) and the task went unknown for an earlier attempt's open
// outcome, to be read back (ledger.Ledger.AwaitReadback).
func uncertainAttempt(t *ledger.Task) string {
	if t.State == ledger.StateUnknown && t.OpenUnknownMs > 0 && t.ErrorClass != unknownOutcome {
		return "an earlier attempt whose outcome is open"
	}
	return "its last attempt"
}

func budgetExhausted(t *ledger.Task, budget string, f Failure, nextAttempt time.Time, noCall, retrySafe bool) ledger.Review {
	id := t.TaskID
	ended := f.Class != "" // an attempt just ended with a classified failure: nothing is in flight
	unstarted := noCall && !ended && t.State == ledger.StateRunning
	readBackAbsent := noCall && !ended && t.State == ledger.StateUnknown
	leaseLost := !ended && !unstarted && t.State == ledger.StateRunning
	markedUnknown := !ended && !readBackAbsent && t.State == ledger.StateUnknown
	// A readback by operation id that found nothing covers every attempt
	// (they share the id): no earlier one acted either.
	earlierUnknown := !markedUnknown && !readBackAbsent && (f.Class == unknownOutcome || t.ErrorClass == unknownOutcome || t.OpenUnknownMs > 0)
	if retrySafe {
		leaseLost, markedUnknown, earlierUnknown = false, false, false
	}
	inFlight := leaseLost || markedUnknown
	mayHaveResult := inFlight || earlierUnknown

	ageBudget := "age budget"
	if t.MaxAgeMs > 0 {
		ageBudget = humanDuration(time.Duration(t.MaxAgeMs)*time.Millisecond) + " age budget"
	}
	var what string
	switch {
	case budget == BudgetAge && !nextAttempt.IsZero():
		what = fmt.Sprintf("could not start its next attempt before its %s ends at %s", ageBudget, stamp(t.DeadlineMs))
	case budget == BudgetAge:
		what = "was not finished within its " + ageBudget
	default:
		budget = BudgetAttempts
		what = fmt.Sprintf("used %d of %d attempts without a result", t.Attempts, t.MaxAttempts)
	}
	switch {
	case ended:
		what += ", the last attempt failing with " + f.describe()
	case t.ErrorClass != "":
		what += " (last recorded error: " + t.ErrorClass + ")"
	}

	r := ledger.Review{Reason: ledger.ReviewBudgetExhausted, ErrorClass: f.Class, ErrorMessage: f.Message}
	switch {
	case retrySafe:
		r.Summary = fmt.Sprintf("Task %s %s; its generation is retry-safe, so an uncertain attempt was retried rather than reviewed, and each call's cost was charged; retry it with a fresh budget once the cause has cleared, or resolve it as failed.", id, what)
	case inFlight:
		r.Summary = fmt.Sprintf("Task %s %s, and %s may have reached the provider; retry it (accepting a possible duplicate generation) or resolve it as completed with evidence or as failed.", id, what, uncertainAttempt(t))
	case readBackAbsent && !earlierUnknown:
		r.Summary = fmt.Sprintf("Task %s %s; the provider's readback has no record of its last attempt, so nothing was generated; retry it with a fresh budget, or resolve it as failed.", id, what)
	case unstarted && !earlierUnknown:
		r.Summary = fmt.Sprintf("Task %s %s; its last attempt's worker stopped after the claim and before starting a provider call, so nothing was generated; retry it with a fresh budget, or resolve it as failed.", id, what)
	case earlierUnknown:
		r.Summary = fmt.Sprintf("Task %s %s, and an earlier attempt whose outcome was unknown may have reached the provider; retry it (accepting a possible duplicate generation) or resolve it as completed with evidence or as failed.", id, what)
	default:
		r.Summary = fmt.Sprintf("Task %s %s; retry it with a fresh budget once the cause has cleared, or resolve it as failed.", id, what)
	}

	r.Known = append(r.Known,
		"budget exhausted: "+budget,
		fmt.Sprintf("attempts used: %d of %d", t.Attempts, t.MaxAttempts),
		fmt.Sprintf("created at %s; %s until %s", stamp(t.CreatedMs), ageBudget, stamp(t.DeadlineMs)),
	)
	if !nextAttempt.IsZero() {
		r.Known = append(r.Known, fmt.Sprintf("the next attempt could start at %s at the earliest (backoff and any Retry-After from the provider), not before the age budget ends", stamp(nextAttempt.UnixMilli())))
	}
	r.Known = append(r.Known, fmt.Sprintf("state when parked: %s", t.State))
	if retrySafe {
		r.Known = append(r.Known, "generation is retry-safe (GENERATION_EFFECT_CLASS): its calls are not marked, so whether the last attempt called the provider is not recorded; a retry costs at most one more call")
	}
	if ended {
		r.Known = append(r.Known, fmt.Sprintf("attempt %d ended with %s and returned no result; no attempt is in flight", t.Attempts, f.describe()))
		if f.Message != "" {
			r.Known = append(r.Known, "error: "+clip(f.Message, MaxDetail))
		}
		if t.ErrorClass != "" && t.ErrorClass != f.Class {
			r.Known = append(r.Known, "an earlier attempt ended with "+t.ErrorClass)
		}
	} else {
		le := lastError(t)
		if readBackAbsent && len(le) > 0 {
			le[0] += "; the readback below settled it"
		}
		r.Known = append(r.Known, le...)
	}
	if t.ProviderRef != "" {
		r.Known = append(r.Known, "provider reference: "+t.ProviderRef)
	}
	switch {
	case readBackAbsent:
		r.Known = append(r.Known, fmt.Sprintf("attempt %d's outcome was unknown, and the provider's readback of operation id %s credibly found no record of it: nothing was generated", t.Attempts, t.OperationID()))
	case unstarted:
		r.Known = append(r.Known, fmt.Sprintf("attempt %d was leased to %q until %s and its worker stopped before recording a call start: no provider call was started under assignment %d", t.Attempts, t.LeaseOwner, stamp(t.LeaseUntil), t.AssignmentVersion))
	case leaseLost:
		r.Known = append(r.Known, fmt.Sprintf("attempt %d was leased to %q until %s and its worker stopped renewing the lease", t.Attempts, t.LeaseOwner, stamp(t.LeaseUntil)))
		if markedAtLease(t) {
			r.Known = append(r.Known, fmt.Sprintf("its worker recorded that the call with operation id %s was starting (the mark is written right before the call); %s", t.OperationID(), unknowableSend("the provider")))
		}
	case !ended && !markedUnknown && (earlierUnknown || retrySafe):
		// A retry-safe generation's uncertain attempts were retried, not
		// recorded: one whose reply was lost may have generated.
		r.Known = append(r.Known, "no attempt was in flight when the task was parked")
	case !ended && !markedUnknown:
		r.Known = append(r.Known, "no attempt was in flight when the task was parked, so nothing was generated and left unsaved")
	}

	if earlierUnknown {
		r.Uncertain = append(r.Uncertain,
			fmt.Sprintf("whether the provider performed an earlier attempt whose outcome was unknown: look up operation id %s at the provider (its console or logs) before resolving", t.OperationID()))
	}
	switch {
	case leaseLost:
		r.Uncertain = append(r.Uncertain,
			fmt.Sprintf("whether attempt %d reached the provider (operation id %s) and produced a result that was never saved before its worker's lease expired", t.Attempts, t.OperationID()))
	case markedUnknown:
		r.Uncertain = append(r.Uncertain,
			// UnknownSince, not updated_ms: a deferred readback
			// (ledger.DeferReadback) writes the task again later.
			fmt.Sprintf("whether the provider produced a result for operation %s around %s (the outcome was recorded as unknown)", t.OperationID(), stamp(t.UnknownSince().UnixMilli())))
	default:
		r.Uncertain = append(r.Uncertain, "whether the cause of the failures (throttling, an outage, a slow provider) has cleared, so that another attempt would succeed")
	}

	retry := "retry: " + retryCmd(id) + " re-queues the same task id with a fresh attempt and age budget"
	if mayHaveResult {
		retry += ", accepting that the provider may generate a second time unless it deduplicates by operation id " + t.OperationID()
	}
	r.SafeActions = append(r.SafeActions, retry)
	if mayHaveResult {
		r.SafeActions = append(r.SafeActions, resolveCompleted(id))
	}
	r.SafeActions = append(r.SafeActions, resolveFailed(id))
	return gated(t, r)
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
		sentLine(t, provider),
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
		"retry: "+retryCmd(id)+" re-queues the same task id with a fresh budget, accepting a possible duplicate generation",
		resolveFailed(id),
	)
	if t.CancelledWhileRunning() {
		cancelledReview(&r, id) // cancel.go
	}
	return gated(t, r)
}

// markedAtLease reports whether t's call-start mark (ledger.MarkCallStarted)
// is at its current assignment: the call was about to start under it.
func markedAtLease(t *ledger.Task) bool {
	return t.CallStartedVersion > 0 && t.CallStartedVersion == t.AssignmentVersion
}

// unknowableSend says why a marked call whose worker then went silent may
// or may not have been sent: the mark precedes the call, and nothing
// tells a worker that stopped between the two from one that sent it.
func unknowableSend(provider string) string {
	return "whether the call reached " + provider + " cannot be known: a worker that stopped between the mark and the call never sent it"
}

// sentLine says what is known about the attempt's send: a worker that
// marked the outcome unknown had sent the call; a lease the reconciler
// expired (ledger.LeaseExpiredMessage) with the call-start mark at its
// version (ledger.MarkCallStarted) had started it; without the mark it says
// nothing about whether the worker got as far as the call (it may have died
// after its claim).
func sentLine(t *ledger.Task, provider string) string {
	line := fmt.Sprintf("attempt %d of %d %%s to %s with operation id %s", t.Attempts, t.MaxAttempts, provider, t.OperationID())
	if t.CancelledWhileRunning() { // cancelled while running (ledger.CancelRunning): see cancelLine
		return cancelLine(t, provider)
	}
	if t.ErrorMessage == ledger.LeaseExpiredMessage && markedAtLease(t) {
		return fmt.Sprintf("attempt %d of %d: its worker recorded that its call to %s with operation id %s was starting (the mark is written right before the call), then its lease expired with nothing else recorded — %s",
			t.Attempts, t.MaxAttempts, provider, t.OperationID(), unknowableSend(provider))
	}
	if t.ErrorMessage == ledger.LeaseExpiredMessage {
		return fmt.Sprintf(line, "may have been sent") + " (the worker's lease expired; whether its call had started is not recorded)"
	}
	return fmt.Sprintf(line, "was sent")
}

// ProviderConfig explains a task parked because provider (its name; may be
// empty) rejected taskledger's configuration, credentials, permissions or
// model: f is the attempt's retrypolicy.PermanentConfig failure (its class
// defaults to "permanent_config"), whose reason and HTTP status are quoted
// and whose message becomes the review's error message.
func ProviderConfig(t *ledger.Task, provider string, f Failure) ledger.Review {
	id := t.TaskID
	if f.Class == "" {
		f.Class = retrypolicy.PermanentConfig.String()
	}
	who := "the provider"
	if provider != "" {
		who = fmt.Sprintf("provider %q", provider)
	}
	refused := who
	if d := f.detail(); d != "" {
		refused += " (" + d + ")"
	}
	r := ledger.Review{Reason: ledger.ReviewProviderConfig, ErrorClass: f.Class, ErrorMessage: f.Message}
	r.Summary = fmt.Sprintf("Task %s was refused by %s because of taskledger's credentials, permissions or model configuration, so no result was produced; fix the configuration, then retry it.", id, refused)
	r.Known = append(r.Known,
		fmt.Sprintf("attempt %d of %d was refused by %s with %s", t.Attempts, t.MaxAttempts, who, f.describe()),
	)
	if f.Message != "" {
		r.Known = append(r.Known, "provider error: "+clip(f.Message, MaxDetail))
	}
	r.Known = append(r.Known,
		"a credentials, permission or model rejection happens before the provider generates anything, so nothing was generated or billed for this attempt",
		fmt.Sprintf("no result is saved; a retry keeps the task id and operation id %s", t.OperationID()),
	)
	r.Uncertain = append(r.Uncertain,
		"which setting is wrong: the API key or secret, the IAM permissions, the model id or the endpoint",
		"whether it affects every task or only this one (other open provider_config items from the same time point to the configuration)",
	)
	r.SafeActions = append(r.SafeActions,
		"fix the provider credentials or configuration (secret, IAM policy, PROVIDER_MODEL, PROVIDER_BASE_URL), then "+retryCmd(id),
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
		"retry: "+retryCmd(id)+" re-queues the same task id with a fresh budget, accepting a possible duplicate generation",
		resolveFailed(id),
	)
	return gated(t, r)
}

// Queue says where a poison message was found.
type Queue int

const (
	// DeadLetterQueue: the reconciler drained it from the task dead-letter
	// queue (deleted there once the review item is recorded).
	DeadLetterQueue Queue = iota
	// TaskQueue: a worker received it on the task queue and acknowledged it
	// (deleted it), so it is never retried.
	TaskQueue
)

// PoisonOptions is what SQS tells about a poison message besides its body.
// The zero value is a dead-letter message with no attributes.
type PoisonOptions struct {
	// Queue is where the message was found.
	Queue Queue
	// ReceiveCount is its ApproximateReceiveCount, 0 if unknown.
	ReceiveCount int
	// SentAt is its SentTimestamp, zero if unknown.
	SentAt time.Time
	// CorrelationID is its correlation_id message attribute, if any
	// (clipped to 128 bytes).
	CorrelationID string
}

// Poison explains a dead-letter message that is not a task reference.
// msgID is the SQS message id; bodySHA and size describe the body (never
// stored itself); why is the parse error.
func Poison(msgID, bodySHA string, size int, why string) ledger.Review {
	return PoisonFrom(msgID, bodySHA, size, why, PoisonOptions{})
}

// PoisonFrom is [Poison] for a message found on o.Queue, with what SQS
// tells about it.
func PoisonFrom(msgID, bodySHA string, size int, why string, o PoisonOptions) ledger.Review {
	r := ledger.Review{
		Reason:        ledger.ReviewPoisonMessage,
		MessageID:     msgID,
		BodySHA256:    bodySHA,
		BodyBytes:     size,
		ErrorClass:    ledger.ReviewPoisonMessage,
		ErrorMessage:  clip(why, MaxDetail),
		CorrelationID: clip(o.CorrelationID, maxCorrelationID),
	}
	var fate string
	switch o.Queue {
	case TaskQueue:
		r.Summary = fmt.Sprintf("Message %s on the task queue is not a task reference, so no task ran for it and it was acknowledged rather than retried; find and fix its sender, then resolve this item.", msgID)
		fate = "a worker acknowledged it (deleted it from the task queue), so it is not retried and does not reach the dead-letter queue"
	default:
		r.Summary = fmt.Sprintf("Message %s on the task dead-letter queue is not a task reference, so no task ran for it; find and fix its sender, then resolve this item.", msgID)
		fate = "it was drained from the task dead-letter queue (deleted there once this item was recorded)"
	}
	r.Known = append(r.Known,
		fmt.Sprintf("body: %d bytes, SHA-256 %s (the body itself is not stored)", size, bodySHA),
		"rejected because: "+clip(strings.TrimPrefix(why, dispatch.ErrPoison.Error()+": "), MaxDetail),
		"no task was created, changed or run for this message",
		fate,
	)
	if o.ReceiveCount > 0 {
		r.Known = append(r.Known, fmt.Sprintf("receive count when recorded: %d", o.ReceiveCount))
	}
	if !o.SentAt.IsZero() {
		r.Known = append(r.Known, "first sent at "+o.SentAt.UTC().Format(time.RFC3339))
	}
	if r.CorrelationID != "" {
		r.Known = append(r.Known, "correlation id: "+r.CorrelationID)
	}
	r.Uncertain = append(r.Uncertain, "which client or process sent it, and whether it was meant to start a task")
	r.SafeActions = append(r.SafeActions,
		"find and fix the sender (the message id, sent time and correlation id identify it in its logs); task messages are exactly {\"task_id\":\"t_…\"}, and nothing in the tasks table needs repair",
		"if a task was intended, submit it through the API (POST /tasks with an Idempotency-Key)",
		"close the item once the sender is fixed: "+resolveCmd(ledger.PoisonID(msgID), ledger.ResolutionFailed, "<what you found>")+" (there is no task to retry)",
	)
	return r
}

// Result describes a result the provider returned that taskledger could
// not save: sizes and references only, never the result itself.
type Result struct {
	// Provider and ProviderRef name the provider and its reference for the
	// call (request or response id), if it gave one.
	Provider    string
	ProviderRef string
	// ResultBytes is the result's size; ItemBytes the size the task item
	// would have had with it (0 if not computed); Limit DynamoDB's item limit.
	ResultBytes int
	ItemBytes   int
	Limit       int
	// FromReadback: the result came from a provider readback (Lookup) by
	// the reconciler, not from the worker's call.
	FromReadback bool
}

func (x Result) source(t *ledger.Task) string {
	p := x.Provider
	if p == "" {
		p = "the provider"
	}
	ref := "no provider reference"
	if x.ProviderRef != "" {
		ref = "provider_ref " + x.ProviderRef
	}
	if x.FromReadback {
		return fmt.Sprintf("a readback from %s found the result of operation %s (%s)", p, t.OperationID(), ref)
	}
	return fmt.Sprintf("attempt %d of %d called %s with operation id %s and the call succeeded (%s)", t.Attempts, t.MaxAttempts, p, t.OperationID(), ref)
}

// ResultTooLarge explains a task whose provider call succeeded with a
// result too large for the task item (DynamoDB's 400 KB item limit): the
// result was not saved, and nothing about the outcome is uncertain.
func ResultTooLarge(t *ledger.Task, x Result) ledger.Review {
	id := t.TaskID
	if x.Limit == 0 {
		x.Limit = 400 * 1024
	}
	size := fmt.Sprintf("the result is %d bytes", x.ResultBytes)
	if x.ItemBytes > 0 {
		size += fmt.Sprintf("; the task item with it would be %d bytes", x.ItemBytes)
	}
	size += fmt.Sprintf(", over DynamoDB's item limit of %d bytes", x.Limit)
	r := ledger.Review{Reason: ledger.ReviewResultTooLarge, ProviderRef: x.ProviderRef, ErrorClass: "result_too_large",
		ErrorMessage: fmt.Sprintf("result of %d bytes exceeds the %d-byte item limit; not saved", x.ResultBytes, x.Limit)}
	r.Summary = fmt.Sprintf("Task %s: the provider produced a result of %d bytes, too large to save in the task item (limit %d bytes), so it was not saved; re-run it with a smaller output or resolve it with evidence.", id, x.ResultBytes, x.Limit)
	r.Known = append(r.Known,
		x.source(t),
		size,
		"the result was not saved: the task has no result and nothing was written but this review",
		"storing large results in S3 with a pointer in the task item comes with DESIGN §12; until then no result over the limit can be saved",
	)
	r.Uncertain = append(r.Uncertain,
		"nothing about the outcome: the provider call succeeded; only its result could not be stored",
		"whether a retry produces a smaller result (generation is not deterministic; a retry is billed again)",
	)
	r.SafeActions = append(r.SafeActions,
		"retry: "+retryCmd(id)+" re-queues the same task id with a fresh budget; the provider is called again and billed again, and the result must fit",
		"resolve as completed: "+resolveCmd(id, ledger.ResolutionCompleted, "<where the result is>")+" if the result was obtained from the provider another way (its reference is above)",
		resolveFailed(id),
	)
	return gated(t, r)
}

// ResultNotSaved explains a task whose result the provider returned but
// which could not be saved: found by a readback (x.FromReadback) and not
// saved before the task's age budget ended, or returned to the worker and
// refused by DynamoDB as invalid (a ValidationException, which no repeat
// can fix) or failing on every repeat while the worker held the task. err
// is the last save error.
func ResultNotSaved(t *ledger.Task, x Result, err error) ledger.Review {
	id := t.TaskID
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	r := ledger.Review{Reason: ledger.ReviewResultNotSaved, ProviderRef: x.ProviderRef, ErrorClass: "result_not_saved", ErrorMessage: msg}
	if x.FromReadback {
		r.Summary = fmt.Sprintf("Task %s: a provider readback found its result (%d bytes) but saving it kept failing until its age budget ended at %s, so it was not saved; fix the cause, then retry or resolve it with evidence.", id, x.ResultBytes, stamp(t.DeadlineMs))
	} else if ledger.IsValidation(err) {
		r.Summary = fmt.Sprintf("Task %s: the provider call succeeded with a result of %d bytes but DynamoDB refused to save it as invalid, so it was not saved; fix the cause, then retry or resolve it with evidence.", id, x.ResultBytes)
	} else {
		r.Summary = fmt.Sprintf("Task %s: the provider call succeeded with a result of %d bytes but saving it kept failing (repeated while the worker held the task), so it was not saved; fix the cause, then retry or resolve it with evidence.", id, x.ResultBytes)
	}
	r.Known = append(r.Known,
		x.source(t),
		fmt.Sprintf("the result is %d bytes", x.ResultBytes),
		"saving it failed: "+clip(msg, MaxDetail),
		"the result was not saved: the task has no result",
	)
	r.Uncertain = append(r.Uncertain,
		"why the save failed (the error above: permissions, throttling or a malformed value)",
	)
	r.SafeActions = append(r.SafeActions,
		"retry: "+retryCmd(id)+" re-queues the same task id with a fresh budget; the provider is called again (the readback may find the same result)",
		"resolve as completed: "+resolveCmd(id, ledger.ResolutionCompleted, "<evidence>")+" citing the provider reference above",
		resolveFailed(id),
	)
	if t.Kind == ledger.KindDeliver {
		// The destination accepted it: a retry is a second delivery, and
		// the delivery did happen, so it did not fail either.
		r.Summary = fmt.Sprintf("Task %s: the destination accepted the delivery but saving its receipt kept failing, so it was not saved; resolve it as completed citing the destination's reference, after fixing the cause.", id)
		r.Known = append(r.Known, "the destination accepted the delivery: a retry would deliver it a second time unless the destination deduplicates by operation id "+t.OperationID())
		r.SafeActions = r.SafeActions[1:2]
	}
	return gated(t, r)
}

func resolveCompleted(id string) string {
	return "resolve as completed: " + resolveCmd(id, ledger.ResolutionCompleted, "<evidence>") + " only with evidence from the provider (its console, logs or request id) that the generation succeeded"
}

// gatedWords turn a summary's offer to resolve as completed into what a
// task with an approval gate allows.
var gatedWords = strings.NewReplacer(
	"; safe: resolve as completed with evidence, or retry accepting a possible duplicate generation.",
	"; safe: retry accepting a possible duplicate generation (the new result awaits approval), or resolve as failed.",
	"retry it (accepting a possible duplicate generation) or resolve it as completed with evidence or as failed.",
	"retry it (accepting a possible duplicate generation; the new result awaits approval) or resolve it as failed.",
	"; resolve it as completed with evidence, or retry accepting a possible duplicate generation.",
	"; retry it accepting a possible duplicate generation (the new result awaits approval), or resolve it as failed.",
	"; safe: resolve as failed (cancelled), or as completed with evidence that the provider acted.",
	"; safe: resolve as failed (cancelled).",
	"or resolve it with evidence.", "or resolve it as failed.",
)

// gated adapts r to a task with an approval gate, which completes only
// through an approval (ledger.Act refuses "completed"): resolving it as
// completed is neither summarised nor offered, and Known says why.
func gated(t *ledger.Task, r ledger.Review) ledger.Review {
	if !t.ApprovalRequired {
		return r
	}
	r.Summary = gatedWords.Replace(r.Summary)
	r.SafeActions = slices.DeleteFunc(slices.Clone(r.SafeActions), func(a string) bool { return strings.HasPrefix(a, "resolve as completed") })
	r.Known = append(r.Known, "the task has an approval gate: only an approval completes it, so resolving it as completed is not offered; a retry generates the result again, and it awaits approval")
	return r
}

func resolveFailed(id string) string {
	return "resolve as failed: " + resolveCmd(id, ledger.ResolutionFailed, "<reason>") + " ends the task; the caller sees the note as its error"
}

// retryCmd and resolveCmd are the operator commands of cmd/taskledger a
// review suggests, quoted for copying. Each decides the park the review
// item records (--park): copied from a review read earlier, it must not
// decide a later park its reader never saw. That number is known for
// certain only to the ledger's write of the item, which replaces
// ledger.ParkMark with it (see doc.go).
func retryCmd(id string) string {
	return "`taskledger review retry " + id + " --park " + ledger.ParkMark + "`"
}

// resolveCmd is "resolve id as outcome", note being what the operator
// fills in ("<reason>").
func resolveCmd(id, outcome, note string) string {
	return "`taskledger review resolve " + id + " --outcome " + outcome + " --note \"" + note + "\" --park " + ledger.ParkMark + "`"
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

// httpStatus finds an HTTP status code in err's chain, 0 if none.
func httpStatus(err error) int {
	var se *retrypolicy.StatusError
	if errors.As(err, &se) {
		return se.StatusCode
	}
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		return hs.HTTPStatusCode()
	}
	return 0
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
