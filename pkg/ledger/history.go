package ledger

import (
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attempt history. A task keeps what each attempt did without a write of
// its own, each piece set by a write the attempt makes anyway:
//
//   - claimed_ms: set by every claim, removed by every give-back (no
//     provider call: no attempt);
//   - call_started_ms: set by MarkCallStarted;
//   - attempt_log (L of S, oldest first, at most max_attempts): an entry
//     (encodeAttempt) per earlier attempt, added by the writes that end an
//     attempt with another to follow (ScheduleRetry*, MarkUnknown,
//     RetryLapsed, TakeOver, Requeue*) given the caller's task (InAttempt).
//
// The latest attempt needs no entry: its claim is claimed_ms, its end
// completed_ms (or updated_ms), its outcome the state. The log is rewritten
// whole, as kumo applies no list_append. An attempt that ended without
// such a write (expired to unknown, then re-queued) shows as OutcomeNotRecorded.

// Outcomes of an attempt (AttemptRecord.Outcome).
const (
	OutcomeRunning     = "running"
	OutcomeCompleted   = "completed"
	OutcomeRetry       = "retry"
	OutcomeFailed      = "failed"
	OutcomeUnknown     = "unknown"
	OutcomeLapsed      = "lapsed" // its lease expired; the reconciler moved the task on
	OutcomeCancelled   = "cancelled"
	OutcomeParked      = "parked" // needs_review: a person decides
	OutcomeNotRecorded = "not_recorded"
)

// AttemptRecord is one attempt of a task, as History reads it. Times are
// epoch ms, 0 where not known.
type AttemptRecord struct {
	Attempt       int
	ClaimedMs     int64
	CallStartedMs int64 // providers without idempotency keys only
	EndedMs       int64
	Outcome       string
	ErrorClass    string
	ProviderRef   string
	// InputTokens and OutputTokens are the provider's reported usage where
	// the entry holds it (nil: not known). A completed attempt's usage is
	// in its result, not here.
	InputTokens, OutputTokens *int64
}

// InAttempt gives a write of the caller's assignment the task as its claim
// returned it (and its own writes changed it since: CallStartedMs after
// MarkCallStarted), so a write that ends an attempt with another to follow
// records it in attempt_log (without it: nothing).
func InAttempt(t *Task) WriteOption { return func(u *update) { u.attempt = t } }

// recordAttempt sets on u the attempt_log of the caller's task (InAttempt)
// with its latest attempt's entry (outcome, errClass, ended nowMs) replacing
// any of the same attempt, keeping the last max_attempts. Without the
// caller's task, or its claimed_ms, it adds nothing.
func recordAttempt(u *update, outcome, errClass string, nowMs int64) {
	t := u.attempt
	if t == nil || t.ClaimedMs == 0 {
		return
	}
	r := AttemptRecord{Attempt: t.Attempts, ClaimedMs: t.ClaimedMs, EndedMs: nowMs, Outcome: outcome, ErrorClass: errClass}
	if t.CallStartedMs >= t.ClaimedMs {
		r.CallStartedMs = t.CallStartedMs
	}
	log := make([]types.AttributeValue, 0, len(t.AttemptLog)+1)
	for _, e := range t.AttemptLog {
		if old, ok := decodeAttempt(e, t.CreatedMs); !ok || !old.of(t) {
			log = append(log, str(e))
		}
	}
	log = append(log, str(encodeAttempt(r, t.CreatedMs)))
	u.set("attempt_log", &types.AttributeValueMemberL{Value: lastOf(log, t.MaxAttempts)})
}

// encodeAttempt is r as one attempt_log entry: space-separated fields
// "attempt claimed call_started ended outcome error_class input_tokens
// output_tokens provider_ref", times in ms after the task's creation in
// base 36 ("" where unknown), trailing empty fields left out; the
// provider's reference is last and may hold spaces.
func encodeAttempt(r AttemptRecord, createdMs int64) string {
	at := func(ms int64) string { return pick(ms == 0, "", strconv.FormatInt(ms-createdMs, 36)) }
	tok := func(n *int64) string {
		if n == nil {
			return ""
		}
		return strconv.FormatInt(*n, 10)
	}
	f := []string{strconv.Itoa(r.Attempt), at(r.ClaimedMs), at(r.CallStartedMs), at(r.EndedMs), r.Outcome, r.ErrorClass,
		tok(r.InputTokens), tok(r.OutputTokens), r.ProviderRef}
	for len(f) > 0 && f[len(f)-1] == "" {
		f = f[:len(f)-1]
	}
	return strings.Join(f, " ")
}

// decodeAttempt reads an attempt_log entry (encodeAttempt).
func decodeAttempt(s string, createdMs int64) (AttemptRecord, bool) {
	f := strings.SplitN(s, " ", 9)
	f = append(f, make([]string, 9-len(f))...) // the trailing fields left out
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return AttemptRecord{}, false
	}
	at := func(i int) int64 {
		v, err := strconv.ParseInt(f[i], 36, 64)
		if err != nil {
			return 0
		}
		return createdMs + v
	}
	tok := func(i int) *int64 {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return nil
		}
		return &v
	}
	return AttemptRecord{Attempt: n, ClaimedMs: at(1), CallStartedMs: at(2), EndedMs: at(3), Outcome: f[4], ErrorClass: f[5],
		InputTokens: tok(6), OutputTokens: tok(7), ProviderRef: f[8]}, true
}

// History returns the task's attempts, oldest first, at most max_attempts
// (the last ones): the recorded entries of attempt_log, the latest
// attempt read from the item, and — for attempt numbers between them that
// left no entry — OutcomeNotRecorded.
func (t *Task) History() []AttemptRecord {
	var out []AttemptRecord
	for _, e := range t.AttemptLog {
		if r, ok := decodeAttempt(e, t.CreatedMs); ok {
			out = append(out, r)
		}
	}
	// After an operator's retry (attempts = 0) the parked attempt's number
	// is gone with the budget: it is not shown.
	if t.ClaimedMs > 0 && t.Attempts > 0 {
		i := slices.IndexFunc(out, func(r AttemptRecord) bool { return r.of(t) })
		if i < 0 {
			out = append(out, AttemptRecord{Attempt: t.Attempts, ClaimedMs: t.ClaimedMs, Outcome: OutcomeRunning})
			i = len(out) - 1
		}
		if t.CallStartedMs >= t.ClaimedMs && out[i].CallStartedMs == 0 {
			out[i].CallStartedMs = t.CallStartedMs
		}
		t.settled(&out[i])
	}
	return lastOf(fillGaps(out), t.MaxAttempts)
}

// lastOf keeps the last n (at least one) elements of s.
func lastOf[T any](s []T, n int) []T { return s[max(len(s)-max(n, 1), 0):] }

// of reports whether r records t's latest attempt: its claim time and
// number (two claims in one millisecond differ in number).
func (r AttemptRecord) of(t *Task) bool { return r.ClaimedMs == t.ClaimedMs && r.Attempt == t.Attempts }

// settled completes r, the task's latest attempt, from the task's state.
func (t *Task) settled(r *AttemptRecord) {
	end := t.UpdatedMs
	switch t.State {
	case StateRunning:
		return
	case StateCompleted, StateAwaitingApproval, StateRejected:
		if !t.HasResult() { // an operator's decision, not this attempt's result
			if r.Outcome == OutcomeRunning {
				r.Outcome = OutcomeParked
			}
			break
		}
		r.Outcome, r.ErrorClass, r.ProviderRef = OutcomeCompleted, "", t.ProviderRef
		if t.CompletedMs > 0 {
			end = t.CompletedMs
		}
	case StateFailed:
		r.Outcome, r.ErrorClass = OutcomeFailed, t.ErrorClass
	case StateCancelled:
		r.Outcome = OutcomeCancelled
	case StateNeedsReview:
		r.Outcome, r.ErrorClass = OutcomeParked, t.ErrorClass
	case StateUnknown:
		if r.Outcome == OutcomeRunning {
			r.Outcome, r.ErrorClass = OutcomeUnknown, t.ErrorClass
		}
		end = t.UnknownSince().UnixMilli() // a deferred readback moves updated_ms
	case StateRetryWait:
		if r.Outcome == OutcomeRunning {
			r.Outcome, r.ErrorClass = OutcomeRetry, t.ErrorClass
		}
	case StateQueued:
		if r.Outcome == OutcomeRunning {
			r.Outcome = OutcomeLapsed
		}
	}
	if r.EndedMs == 0 {
		r.EndedMs = end
	}
}

// fillGaps adds an OutcomeNotRecorded record for each attempt number a
// record skips, counting from 1 at the start and after an operator's retry.
func fillGaps(in []AttemptRecord) []AttemptRecord {
	var out []AttemptRecord
	for i, r := range in {
		from := 1
		if i > 0 && in[i-1].Attempt < r.Attempt {
			from = in[i-1].Attempt + 1
		}
		for n := from; n < r.Attempt; n++ {
			out = append(out, AttemptRecord{Attempt: n, Outcome: OutcomeNotRecorded})
		}
		out = append(out, r)
	}
	return out
}
