package worker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// MaxErrorMessage caps the error message the worker stores for the caller.
const MaxErrorMessage = 512

var (
	ack         = func(o string) result { return result{outcome: o} }
	retryRec    = func(o string) result { return result{outcome: o, retry: true} }
	deferred    = result{outcome: OutcomeDeferred, retry: true}
	notAdmitted = result{outcome: OutcomeNotAdmitted, retry: true}
)

// record runs one message through DESIGN §6. ctx is the invocation's
// context (ledger writes that settle an attempt use it); work ends
// DeadlineMargin earlier (claims and provider calls stop there).
func (h *Handler) record(ctx, work context.Context, rec events.SQSMessage) result {
	log := h.log().With("message_id", rec.MessageId)
	msg, err := dispatch.Parse(rec.Body)
	if err != nil {
		return h.poison(ctx, rec, err, log)
	}
	id := msg.TaskID
	log = log.With("task_id", id)

	// Checked before the claim too, so a record turned away consumes no attempt.
	if !h.admitted(work) {
		log.WarnContext(ctx, "too little time left for a provider call; leaving the record for another invocation", h.lateAttrs(work)...)
		h.setVisibility(ctx, rec, 0, log)
		return notAdmitted
	}
	if h.died(ctx, work, h.hooks().BeforeClaim, id, log) {
		return deferred
	}

	owner := h.owner(ctx, rec.MessageId)
	t, err := h.Ledger.Claim(ctx, id, ledger.ClaimOptions{
		Owner: owner,
		Lease: h.lease(),
		// A deliver task's expired lease is the reconciler's.
		AllowTakeover: h.repeatable(&ledger.Task{Kind: provider.KindGenerate}),
		TakeoverKind:  provider.KindGenerate,
	})
	if err != nil {
		return h.notClaimed(ctx, rec, id, owner, err, log)
	}
	log = log.With("version", t.AssignmentVersion, "attempt", t.Attempts)
	log.DebugContext(ctx, "claimed", "max_attempts", t.MaxAttempts, "input_bytes", len(t.Input))

	if h.died(ctx, work, h.hooks().AfterClaim, id, log) {
		return deferred
	}
	if !h.admitted(work) { // the claim ate the time: give the attempt back, not leave it to the lease
		h.giveBackUncalled(ctx, rec, t, 0, "too little time left after the claim", log, h.lateAttrs(work)...)
		return notAdmitted
	}

	input, r, ok := h.resolveInput(ctx, rec, t, log) // S3 claim-check (payloads.go)
	if !ok {
		return r
	}
	docs, docsDone, r, ok := h.resolveDocuments(ctx, rec, t, log) // documents.go
	if !ok {
		return r
	}
	defer docsDone()
	tk, r, ok := h.admitCall(ctx, rec, t, input, log) // provider admission (admission.go)
	if !ok {
		return r
	}
	// Reserved before the call-start mark: a task parked for its budget started no call.
	rs, r, ok := h.reserve(ctx, rec, t, input, log) // spend budget (spend.go)
	if !ok {
		h.releaseTicket(ctx, tk, log) // no call: the admission is given back
		return r
	}
	noCall := func() { // the reservation and the admission are given back
		h.settle(ctx, t, input, rs, attempt{err: errNoCall}, log)
		h.releaseTicket(ctx, tk, log)
	}
	leaseUntil, r, ok := h.markCallStarted(ctx, rec, t, log)
	if !ok {
		noCall()
		return r
	}
	if tk, r, ok = h.freshTicket(ctx, rec, t, input, tk, rs, log); !ok {
		return r
	}
	if fe, err := h.leaseForCall(ctx, t, leaseUntil, log); err != nil {
		noCall()
		if fe != nil {
			// Never unknown or parked at this assignment (leaseForCall):
			// nothing to give back. A cancel of it ends the task; anything
			// else is not ours.
			return h.uncalledRefusal(ctx, rec, t, "the renewal before the call", fe, log)
		}
		// From unknown too, when the reconciler expired the lease meanwhile.
		return h.giveBackUncalled(ctx, rec, t, 0, "the lease ran short before the call", log)
	}
	if !h.admitted(work) {
		// The writes since the claim (a slow mark, a renewal) ate the time: a
		// call cut by the deadline would be an uncertain outcome of our making.
		noCall()
		h.giveBackUncalled(ctx, rec, t, 0, "too little time left before the call", log, h.lateAttrs(work)...)
		return notAdmitted
	}
	a := h.call(ctx, work, rec, t, input, docs, log)
	defer closeStream(a.stream) // no done frame unless complete saved the result
	h.settleAdmission(ctx, tk, a, log)

	if h.died(ctx, work, h.hooks().AfterProvider, id, log) {
		return deferred
	}
	h.settle(ctx, t, input, rs, a, log)
	if a.fenced != nil && a.err != nil {
		// The call cut by the fence may have acted: settle sends nothing,
		// but ends cancelled now a retry-safe call cut by a cancel of this
		// assignment (nothing to wait for or read back).
		if r, ok := h.settleRefused(ctx, rec, t, a.fenced, &known{kind: refusal(false, h.retrySafe(t), knowMayHaveActed)}, log); ok {
			return r
		}
		log.WarnContext(ctx, "fenced during the provider call; nothing saved", "why", a.fenced.Why, "current_version", currentVersion(a.fenced))
		return ack(OutcomeFenced)
	}
	// Also after a refused renewal that left the task ours (stillOurs).
	if a.err == nil {
		r = h.complete(ctx, rec, t, a.res, a.stream, log)
	} else {
		r = h.failure(ctx, rec, t, a.err, a.cutBy, log)
	}
	switch r.outcome {
	case OutcomeCompleted, OutcomeRetried, OutcomeFailed, OutcomeParked, OutcomeUnknown: // this worker wrote the outcome
		if h.died(ctx, work, h.hooks().AfterSave, id, log) {
			return deferred
		}
	}
	return r
}

// lateAttrs are the log attributes of a record turned away for time.
func (h *Handler) lateAttrs(work context.Context) []any {
	var left time.Duration
	if dl, ok := work.Deadline(); ok {
		left = time.Until(dl)
	}
	return []any{"call_timeout_ms", h.callTimeout().Milliseconds(), "time_left_ms", left.Milliseconds()}
}

func (h *Handler) hooks() Hooks {
	if h.Hooks == nil {
		return Hooks{}
	}
	return *h.Hooks
}

// died runs a hook with the work context; true means "the worker died here".
func (h *Handler) died(ctx, work context.Context, f func(context.Context, string) error, taskID string, log *slog.Logger) bool {
	if f == nil {
		return false
	}
	if err := f(work, taskID); err != nil {
		log.WarnContext(ctx, "hook stopped the record", "error", errors.Join(errDied, err).Error())
		return true
	}
	return false
}

func currentVersion(fe *ledger.FencedError) int64 {
	if fe.Current == nil {
		return 0
	}
	return fe.Current.AssignmentVersion
}

// attempt is what one provider call under a heartbeat came to.
type attempt struct {
	res    provider.Result
	err    error
	fenced *ledger.FencedError // a renewal was rejected: another worker owns the task
	// cutBy names what ended the call in flight: "call_timeout", or
	// "deadline_margin" (for an admitted record, only a provider overrunning
	// its own timeout); "" otherwise.
	cutBy  string
	stream StreamAttempt // nil without streaming
}

// call runs the provider under a heartbeat, bounded by the call timeout and
// the task's age deadline (claimed late in its budget, it still ends in time).
func (h *Handler) call(ctx, work context.Context, rec events.SQSMessage, t *ledger.Task, input string, docs []provider.Document, log *slog.Logger) attempt {
	fenceable, cancel := context.WithCancelCause(work)
	defer cancel(nil)
	callCtx, stop := context.WithTimeoutCause(fenceable, min(h.callTimeout(), time.UnixMilli(t.DeadlineMs).Sub(h.Ledger.Now())), errCallTimeout)
	defer stop()
	hb := h.startHeartbeat(callCtx, cancel, rec, t, log)

	req := provider.Request{
		OperationID:   t.OperationID(),
		Attempt:       t.Attempts,
		Kind:          t.Kind,
		Input:         json.RawMessage(input),
		CorrelationID: t.CorrelationID,
		Documents:     docs,
	}
	start := time.Now()
	p := h.step(t)
	st, sink := h.beginStream(ctx, t, p)
	res, err := provider.Call(callCtx, p, req, sink)
	latency := time.Since(start)
	fenced := hb.stop()

	class := ""
	if err != nil {
		class = retrypolicy.DefaultClassifier(err).Class.String()
	}
	_ = h.Metrics.Record("Service", "worker", "Provider", p.Name()).Set("ProviderLatency", float64(latency.Milliseconds()), metrics.Milliseconds).
		Add("ProviderCalls", 1, metrics.Count).Property("task_id", t.TaskID).Property("error_class", class).Flush()
	log.InfoContext(ctx, "provider returned", "kind", t.Kind, "provider", p.Name(), "latency_ms", latency.Milliseconds(),
		"error_class", class, "heartbeats", hb.beats.Load())
	a := attempt{res: res, err: err, fenced: fenced, stream: st}
	if err != nil && fenced == nil {
		switch {
		case work.Err() != nil:
			a.cutBy = "deadline_margin"
		case errors.Is(context.Cause(callCtx), errCallTimeout):
			a.cutBy = "call_timeout"
		}
	}
	return a
}

// errCallTimeout is the cause of a call context ended by its call timeout.
var errCallTimeout = errors.New("worker: provider call timeout")

// complete saves the result, fenced on the assignment version.
func (h *Handler) complete(ctx context.Context, rec events.SQSMessage, t *ledger.Task, res provider.Result, st StreamAttempt, log *slog.Logger) result {
	name := cmp.Or(res.Provider, h.step(t).Name())
	c := ledger.Completion{Result: string(res.Output), Provider: name, ProviderRef: res.ProviderRef, ApprovalTTL: t.ApprovalTTL()}
	// The follow-ups (notifications, a plan's deliveries) are written with
	// the completion; a large result goes to the payload bucket first; an
	// item over DynamoDB's limit is parked without sending a write that can
	// only fail.
	var done *ledger.Task // the task as the completion left it
	var err error
	if c.FollowUps, err = h.Notify.Completion(t, string(res.Output)); err == nil {
		c, err = h.placeResult(ctx, t, c, log)
	}
	if err == nil {
		err = ledger.CheckCompletion(t, c)
	}
	if err == nil { // a lost reply is recognised as saved: a FencedError means not saved
		err = h.save(ctx, rec, t, "complete", func(o ...ledger.WriteOption) (_ *ledger.Task, err error) {
			done, err = h.Ledger.Complete(ctx, t.TaskID, t.AssignmentVersion, c, o...)
			return done, err
		}, log)
	}
	var fe *ledger.FencedError
	switch {
	case err == nil:
		log.InfoContext(ctx, "completed", "provider", name, "provider_ref", res.ProviderRef, "result_bytes", len(res.Output))
		endStream(ctx, st, done, c)
		return ack(OutcomeCompleted)
	case errors.As(err, &fe):
		if r, ok := h.settleRefused(ctx, rec, t, err, &known{kind: knowResult, c: c}, log); ok {
			return r
		}
		log.WarnContext(ctx, "completion rejected; result discarded", "why", fe.Why, "current_version", currentVersion(fe))
		return ack(OutcomeFenced)
	}
	// Parked with the provider reference (doc.go, "Failed settling writes"); had
	// a repeat been applied after all, the park finds the task completed.
	x := review.Result{Provider: name, ProviderRef: res.ProviderRef, ResultBytes: len(res.Output)}
	return h.parkKnown(ctx, rec, t, known{kind: knowUnsaved, review: unsavedReview(ctx, t, x, err, log)}, log)
}

// unsavedReview logs and words the review of a result the task item could
// not take: too large (result_too_large), or refused as invalid or still
// failing when the repeats ran out (result_not_saved).
func unsavedReview(ctx context.Context, t *ledger.Task, x review.Result, err error, log *slog.Logger) ledger.Review {
	var tl *ledger.ItemTooLargeError
	if errors.As(err, &tl) {
		x.ItemBytes, x.Limit = tl.Bytes, tl.Limit
		log.WarnContext(ctx, "result too large for the task item; not saved", "result_bytes", x.ResultBytes, "item_bytes", tl.Bytes, "limit_bytes", tl.Limit)
		return review.ResultTooLarge(t, x)
	}
	var nd *followup.NotDeliverableError
	if errors.As(err, &nd) {
		// Not an object, or too large for a delivery: a person decides.
		log.WarnContext(ctx, "result does not make a valid delivery for the plan; not saved", "deliver_index", nd.Index, "result_bytes", x.ResultBytes)
		return review.ResultNotSaved(t, x, err)
	}
	log.ErrorContext(ctx, "result not saved; parking it result_not_saved", "error", err.Error(), "result_bytes", x.ResultBytes)
	return review.ResultNotSaved(t, x, err)
}

// failure settles a failed provider call by its class.
func (h *Handler) failure(ctx context.Context, rec events.SQSMessage, t *ledger.Task, perr error, cutBy string, log *slog.Logger) result {
	c := retrypolicy.DefaultClassifier(perr)
	msg := safeMessage(c, perr)
	log = log.With("error_class", c.Class.String(), "reason", c.Reason)
	if cutBy != "" {
		if notSent(perr) { // settle charged it nothing
			return h.giveBackUncalled(ctx, rec, t, 0, "the call was cut by "+cutBy+" before it was sent", log)
		}
		// The provider may have acted: an uncertain attempt, never a failed one.
		c = retrypolicy.Classification{Class: retrypolicy.UnknownOutcome, Reason: cutBy}
		msg = "the worker's deadline cut the provider call short after it was sent; the provider may have acted"
		if cutBy == "call_timeout" {
			msg = fmt.Sprintf("the provider call ran past its %s call timeout, or the task's age deadline, after it was sent; the provider may have acted", h.callTimeout())
		}
		r := h.uncertain(ctx, rec, t, c, msg, log)
		r.retry = r.retry || cutBy == "deadline_margin" // unfinished in this invocation: report it
		return r
	}
	// Only a refusal in so many words settles the assignment where the
	// reconciler or a cancel got first (doc.go, "Settling after the lease is
	// lost"): a gateway's 502 can come after the model generated.
	refused := retrypolicy.Refused(perr)
	switch c.Class {
	case retrypolicy.PermanentInput:
		// An input refused after the provider acted (a content filter:
		// retrypolicy.ErrActed) is no refusal: the reconciler's rule decides.
		kn := &known{kind: refusal(refused, h.retrySafe(t), knowRefusedInput), class: c, perr: perr, msg: msg}
		if r, done := h.fail(ctx, rec, t, c.Class.String(), msg, refused, kn, log); done {
			return r
		}
		log.InfoContext(ctx, "failed: the input was rejected")
		return ack(OutcomeFailed)
	case retrypolicy.UnknownOutcome:
		return h.uncertain(ctx, rec, t, c, msg, log)
	}
	// Configuration parks; anything else is retried, or parked past the budgets.
	var r ledger.Review
	if c.Class == retrypolicy.PermanentConfig {
		config := review.ProviderConfig
		if t.Kind == deliver.Kind {
			config = review.DestinationConfig
		}
		r = config(t, h.step(t).Name(), review.FailureOf(c, perr, msg))
	} else {
		now := h.Ledger.Now()
		notBefore, budget := h.nextRetry(t, c, now)
		if budget == "" {
			return h.scheduleRetry(ctx, rec, t, c, msg, notBefore, now, refused, log)
		}
		r = review.BudgetExhaustedAfterClass(t, budget, review.FailureOf(c, nil, msg), notBefore, h.retrySafe(t))
	}
	return h.parkKnown(ctx, rec, t, known{kind: refusal(refused, h.retrySafe(t), knowRefusedPark), class: c, review: r}, log)
}

// nextRetry returns when the next attempt may start, or which budget rules
// it out ("max_attempts" or "max_age"; with "max_age", the time is when the
// next attempt could have started).
func (h *Handler) nextRetry(t *ledger.Task, c retrypolicy.Classification, now time.Time) (time.Time, string) {
	if t.MaxAttempts > 0 && t.Attempts >= t.MaxAttempts {
		return time.Time{}, retrypolicy.ReasonMaxAttempts
	}
	notBefore := h.Policy.NextRetryAt(now, max(t.Attempts-1, 0), c.RetryAfter)
	deadline := t.DeadlineMs
	if deadline <= 0 { // tasks always carry it; fall back to the policy's age budget
		deadline = t.Created().Add(orDefault(h.Policy.MaxAge, retrypolicy.DefaultMaxAge)).UnixMilli()
	}
	if notBefore.UnixMilli() >= deadline {
		return notBefore, retrypolicy.ReasonMaxAge
	}
	return notBefore, ""
}

// scheduleRetry has no fallback when the repeats run out: a Release would
// give back an attempt the provider was called for (max_attempts bypassed:
// one call per delivery) and drop not_before (Retry-After ignored by any
// other copy of the message); the message comes back and the lease decides.
func (h *Handler) scheduleRetry(ctx context.Context, rec events.SQSMessage, t *ledger.Task, c retrypolicy.Classification, msg string, notBefore, now time.Time, refused bool, log *slog.Logger) result {
	kn := known{kind: refusal(refused, h.retrySafe(t), knowRefusedRetry), class: c, msg: msg, notBefore: notBefore}
	if r, done := h.saveAfterError(ctx, rec, t, "retry", refused, &kn, func(o ...ledger.WriteOption) (*ledger.Task, error) {
		if c.Class == retrypolicy.UnknownOutcome && !h.retrySafe(t) { // deduplicated: open until collected
			return h.Ledger.ScheduleRetryUncertain(ctx, t.TaskID, t.AssignmentVersion, notBefore, msg, o...)
		}
		return h.Ledger.ScheduleRetry(ctx, t.TaskID, t.AssignmentVersion, notBefore, c.Class.String(), msg, o...)
	}, log); done {
		return r
	}
	delay := notBefore.Sub(now)
	h.setVisibility(ctx, rec, delay, log)
	log.InfoContext(ctx, "retry scheduled", "delay_ms", delay.Milliseconds(), "retry_after_ms", c.RetryAfter.Milliseconds())
	return retryRec(OutcomeRetried)
}

// uncertain settles an attempt whose outcome is unknown (doc.go, "Uncertain
// outcomes and effect classes"): a retry when repeatable and the budgets
// allow; else unknown, for the reconciler's readback.
func (h *Handler) uncertain(ctx context.Context, rec events.SQSMessage, t *ledger.Task, c retrypolicy.Classification, msg string, log *slog.Logger) result {
	if h.repeatable(t) {
		now := h.Ledger.Now()
		why := " (the provider deduplicates by operation id, so it is re-sent under the same key)"
		if !provider.HonoursIdempotency(h.step(t)) {
			why = " (generation is retry-safe: it is called again, and each call's cost is charged)"
		}
		if notBefore, budget := h.nextRetry(t, c, now); budget == "" {
			return h.scheduleRetry(ctx, rec, t, c, msg+why, notBefore, now, false, log)
		}
	}
	// Refused, it is the reconciler's (settle sends nothing for knowMayHaveActed).
	if r, done := h.saveAfterError(ctx, rec, t, "unknown", false, &known{kind: knowMayHaveActed}, func(o ...ledger.WriteOption) (*ledger.Task, error) {
		return h.Ledger.MarkUnknown(ctx, t.TaskID, t.AssignmentVersion, c.Class.String(), msg, o...)
	}, log); done {
		return r
	}
	log.WarnContext(ctx, "outcome unknown; left for the reconciler's readback")
	return ack(OutcomeUnknown)
}

// saveAfterError saves write, a settling write after a provider error (with
// refused, accepted from unknown at this version too: ledger.AfterRefusal).
// Refused, kn settles it (settleRefused; nil: nothing), else it is
// acknowledged as fenced; one that kept failing defers. done=false: saved.
func (h *Handler) saveAfterError(ctx context.Context, rec events.SQSMessage, t *ledger.Task, op string, refused bool, kn *known, write func(...ledger.WriteOption) (*ledger.Task, error), log *slog.Logger) (result, bool) {
	err := h.save(ctx, rec, t, op, func(o ...ledger.WriteOption) (*ledger.Task, error) {
		if refused {
			o = append(o, ledger.AfterRefusal())
		}
		return write(o...)
	}, log)
	if err == nil {
		return result{}, false
	}
	if r, ok := h.settleRefused(ctx, rec, t, err, kn, log); ok {
		return r, true
	}
	var fe *ledger.FencedError
	if errors.As(err, &fe) {
		log.WarnContext(ctx, op+" rejected: the assignment was fenced; nothing saved", "why", fe.Why, "current_version", currentVersion(fe))
		return ack(OutcomeFenced), true
	}
	log.ErrorContext(ctx, op+" failed; the message will come back", "error", err.Error())
	return deferred, true
}

// fail fails t's assignment with class and msg (saveAfterError), with the
// requester's notification in the same transaction (ledger.WithFollowUps;
// with Notify nil there is none, and the write is one UpdateItem).
func (h *Handler) fail(ctx context.Context, rec events.SQSMessage, t *ledger.Task, class, msg string, refused bool, kn *known, log *slog.Logger) (result, bool) {
	return h.saveAfterError(ctx, rec, t, "fail", refused, kn, func(o ...ledger.WriteOption) (*ledger.Task, error) {
		return h.Ledger.Fail(ctx, t.TaskID, t.AssignmentVersion, class, msg, append(o, ledger.WithFollowUps(h.Notify.Failed(t)))...)
	}, log)
}

// park moves the task to needs_review (from where o says) with its review
// item, saved like a settling write: the worker may be the only one that
// knows what the park records (a repeat after an applied send is "already
// parked"). With kn, a park refused because the reconciler or a cancel got
// there first is settled by what the worker knows.
func (h *Handler) park(ctx context.Context, rec events.SQSMessage, t *ledger.Task, o ledger.ParkOptions, r ledger.Review, kn *known, log *slog.Logger) result {
	o.FollowUps = h.Notify.Parked(t) // the requester's notification, as with fail
	err := h.save(ctx, events.SQSMessage{}, t, "park", func(...ledger.WriteOption) (*ledger.Task, error) {
		return h.Ledger.Park(ctx, t, o, r)
	}, log)
	var ce *ledger.ConflictError
	if o.State == ledger.StateUnknown && errors.As(err, &ce) && where(ce.Task, t.AssignmentVersion) == atUnknown {
		kn = nil // still unknown at mine (an open review refused it): this park again cannot help
	}
	if res, ok := h.settleRefused(ctx, rec, t, err, kn, log); ok {
		return res
	}
	switch {
	case err == nil:
		log.WarnContext(ctx, "parked for review", "review_reason", r.Reason)
		return ack(OutcomeParked)
	case ledger.IsAlreadyParked(err):
		log.InfoContext(ctx, "already parked by someone else", "review_reason", r.Reason)
		return ack(OutcomeAckedDuplicate)
	case !errors.As(err, &ce):
		log.ErrorContext(ctx, "park failed; the message will come back", "error", err.Error())
		return deferred
	}
	log.WarnContext(ctx, "park rejected: the task changed", "state", string(ce.State))
	if ce.State.Terminal() || ce.State == ledger.StateUnknown || ce.State == ledger.StateRunning {
		return ack(OutcomeFenced)
	}
	return deferred
}

// giveBackUncalled releases t (releaseUncalled) and makes the message
// visible again after d (0: at once).
func (h *Handler) giveBackUncalled(ctx context.Context, rec events.SQSMessage, t *ledger.Task, d time.Duration, why string, log *slog.Logger, attrs ...any) result {
	h.releaseUncalled(ctx, rec, t, why, log, attrs...)
	h.setVisibility(ctx, rec, d, log)
	return deferred
}

// parkKnown parks the worker's running assignment with what it knows (a
// result it cannot save, or a refusal that parks).
func (h *Handler) parkKnown(ctx context.Context, rec events.SQSMessage, t *ledger.Task, kn known, log *slog.Logger) result {
	return h.park(ctx, rec, t, ledger.ParkOptions{State: ledger.StateRunning, Version: t.AssignmentVersion}, kn.review, &kn, log)
}

// release gives back an assignment, and its attempt, under which no call was
// made, saved like a settling write (a lost release leaves the task leased
// with no call behind it). Refused, uncalled settles it: cancelled, when a
// cancel while running had fenced it.
func (h *Handler) release(ctx context.Context, rec events.SQSMessage, t *ledger.Task, log *slog.Logger) (cancelled bool, err error) {
	err = h.save(ctx, rec, t, "release", func(o ...ledger.WriteOption) (*ledger.Task, error) {
		return h.Ledger.Release(ctx, t.TaskID, t.AssignmentVersion, o...)
	}, log)
	var fe *ledger.FencedError
	if errors.As(err, &fe) {
		if d, gerr := h.uncalled(ctx, rec, t, fe.Current, log); d != sendNothing {
			return !d.givesBack(), gerr // given back, or the cancel settled: the message finds it so
		}
	}
	return false, err
}

// releaseUncalled releases t after why stopped the record before any call,
// and logs the outcome with attrs. false: the release failed.
func (h *Handler) releaseUncalled(ctx context.Context, rec events.SQSMessage, t *ledger.Task, why string, log *slog.Logger, attrs ...any) bool {
	cancelled, err := h.release(ctx, rec, t, log)
	switch {
	case err != nil:
		log.ErrorContext(ctx, why+"; provider not called, and the release failed: the lease will expire", append(attrs, "release_error", err.Error())...)
		return false
	case cancelled:
		log.WarnContext(ctx, why+"; the task was cancelled while running in between, provider not called", attrs...)
	default:
		log.WarnContext(ctx, why+"; released the task and its attempt, provider not called", attrs...)
	}
	return true
}

// unconfirmedClaim gives back a claim that may have been applied unconfirmed
// (doc.go, "Failed settling writes"). false, sending nothing, when err
// certainly did not apply or the invocation is ending.
func (h *Handler) unconfirmedClaim(ctx context.Context, rec events.SQSMessage, id, owner string, err error, log *slog.Logger) bool {
	var th *ledger.ThrottledError
	if errors.As(err, &th) || !ledger.MayHaveApplied(err) || ctx.Err() != nil {
		return false // certainly not applied
	}
	var t *ledger.Task
	var ok bool
	rerr := h.save(ctx, events.SQSMessage{}, &ledger.Task{TaskID: id}, "release claim", func(...ledger.WriteOption) (_ *ledger.Task, err error) {
		t, ok, err = h.Ledger.ReleaseClaim(ctx, id, owner, 0)
		return t, err
	}, log)
	switch {
	case rerr != nil:
		log.ErrorContext(ctx, "claim unconfirmed and its release failed; the message will come back", "error", err.Error(), "release_error", rerr.Error())
	case ok:
		log.WarnContext(ctx, "claim unconfirmed; released it (no provider call was made) and the message will come back", "error", err.Error(), "version", t.AssignmentVersion)
		h.setVisibility(ctx, rec, 0, log)
	default:
		log.ErrorContext(ctx, "claim failed and was not applied; the message will come back", "error", err.Error())
	}
	return true
}

// notClaimed decides what a failed or refused claim means for the message.
func (h *Handler) notClaimed(ctx context.Context, rec events.SQSMessage, id, owner string, err error, log *slog.Logger) result {
	var nc *ledger.NotClaimableError
	if !errors.As(err, &nc) {
		if !h.unconfirmedClaim(ctx, rec, id, owner, err, log) {
			log.ErrorContext(ctx, "claim failed; the message will come back", "error", err.Error())
		}
		return deferred
	}
	log = log.With("reason", nc.Reason)
	switch nc.Reason {
	case ledger.ReasonTerminal, ledger.ReasonParked, ledger.ReasonUnknown, ledger.ReasonLeased, ledger.ReasonExpiredLease:
		log.InfoContext(ctx, "not claimable; acknowledged without a provider call", "state", string(nc.Task.State))
		return ack(OutcomeAckedDuplicate)
	case ledger.ReasonNotFound:
		log.WarnContext(ctx, "message names a task that does not exist; acknowledged")
		return ack(OutcomeAckedDuplicate)
	case ledger.ReasonNotDue:
		delay := time.UnixMilli(nc.Task.NotBefore).Sub(h.Ledger.Now())
		h.setVisibility(ctx, rec, max(delay, time.Second), log)
		log.InfoContext(ctx, "retry not due yet; message delayed", "delay_ms", delay.Milliseconds())
		return deferred
	case ledger.ReasonBudgetExhausted:
		t := nc.Task
		if _, open := t.OpenUncertainty(); t.State == ledger.StateRunning || open && !h.retrySafe(t) {
			// An expired lease, or an earlier attempt's open outcome, may have
			// acted: the reconciler reads back, or parks with what it knows.
			log.InfoContext(ctx, "no budget left and an attempt's outcome open; acknowledged, left to the reconciler", "state", string(t.State))
			return ack(OutcomeAckedDuplicate)
		}
		o := ledger.ParkOptions{State: t.State, Version: t.AssignmentVersion}
		return h.park(ctx, rec, t, o, review.BudgetExhaustedAfterClass(t, nc.Budget, review.Failure{}, time.Time{}, h.retrySafe(t)), nil, log)
	default: // contended, or a reason this worker does not know
		log.InfoContext(ctx, "claim contended; the message will come back")
		return deferred
	}
}

// poison records a message that is not a task reference and acknowledges it.
func (h *Handler) poison(ctx context.Context, rec events.SQSMessage, perr error, log *slog.Logger) result {
	sum := sha256.Sum256([]byte(rec.Body))
	r := poisonReview(rec, hex.EncodeToString(sum[:]), perr)
	log = log.With("body_sha256", r.BodySHA256, "body_bytes", r.BodyBytes)
	if _, err := h.Ledger.PutPoison(ctx, r); err != nil {
		log.ErrorContext(ctx, "poison message could not be recorded; the message will come back", "error", err.Error())
		return deferred
	}
	log.WarnContext(ctx, "poison message recorded for review and acknowledged")
	return ack(OutcomePoison)
}

// setVisibility makes the message visible again after d (0: at once). A
// failure is logged: the queue's default applies, and a not-due claim corrects it.
func (h *Handler) setVisibility(ctx context.Context, rec events.SQSMessage, d time.Duration, log *slog.Logger) {
	if h.SQS == nil || h.QueueURL == "" || rec.ReceiptHandle == "" {
		return
	}
	secs := visibilitySeconds(d)
	_, err := h.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(h.QueueURL), ReceiptHandle: aws.String(rec.ReceiptHandle), VisibilityTimeout: secs,
	})
	if err != nil {
		log.WarnContext(ctx, "change message visibility failed", "visibility_s", secs, "error", err.Error())
	}
}

// visibilitySeconds rounds d up to whole seconds within [0, 12h].
func visibilitySeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	d = min(d, MaxVisibility)
	return int32((d + time.Second - 1) / time.Second)
}

// safeMessage is the error text stored for the caller: the class reason
// (unless only "steered_…") and the provider's error, which by the provider
// contract never carries the prompt or a credential.
func safeMessage(c retrypolicy.Classification, err error) string {
	s := err.Error()
	if c.Reason != "" && !strings.HasPrefix(c.Reason, "steered_") {
		s = c.Reason + ": " + s
	}
	return clip(s, MaxErrorMessage)
}
