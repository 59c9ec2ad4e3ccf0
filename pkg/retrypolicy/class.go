package retrypolicy

import (
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Class is what a failure means for the task. The zero value means "no
// failure" and is what [Classify] returns for a nil error.
type Class int

const (
	// Transient failures are retried later with backoff.
	Transient Class = iota + 1
	// PermanentInput means the caller's input is at fault: the task ends failed.
	PermanentInput
	// PermanentConfig means configuration, credentials or permissions are
	// wrong: the task is parked for a person (needs_review).
	PermanentConfig
	// UnknownOutcome means the side effect may or may not have happened: the
	// task goes to unknown and is resolved by reading the provider back.
	UnknownOutcome
)

// String returns the class's stable snake_case name, suitable for logs,
// metrics and stored reasons.
func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case PermanentInput:
		return "permanent_input"
	case PermanentConfig:
		return "permanent_config"
	case UnknownOutcome:
		return "unknown_outcome"
	case 0:
		return "none"
	}
	return "class_" + strconv.Itoa(int(c))
}

// Error steers classification. Providers and handlers return it (through the
// constructors below) when they know better than the generic rules; an *Error
// anywhere in an error chain decides the class.
type Error struct {
	// Class is the class the error is to be treated as.
	Class Class
	// RetryAfter is a floor for the next delay; 0 if none.
	RetryAfter time.Duration
	// Err is the underlying error.
	Err error
}

// Error returns the underlying error's text: steering adds no words.
func (e *Error) Error() string {
	if e.Err == nil {
		return "retrypolicy: " + e.Class.String()
	}
	return e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error of the same class; a target with a
// zero Class matches any *Error. It lets callers write
// errors.Is(err, &retrypolicy.Error{Class: retrypolicy.PermanentConfig}).
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) || t == nil {
		return false
	}
	return t.Class == 0 || t.Class == e.Class
}

func steer(c Class, err error, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	return &Error{Class: c, RetryAfter: max(retryAfter, 0), Err: err}
}

// Retryable marks err as Transient: retry later with backoff. nil → nil.
func Retryable(err error) error { return steer(Transient, err, 0) }

// Throttled marks err as Transient with a floor on the next delay (a
// Retry-After). Negative floors count as 0. nil → nil.
func Throttled(err error, retryAfter time.Duration) error {
	return steer(Transient, err, retryAfter)
}

// Permanent marks err as PermanentInput: the caller's input is at fault and
// the task ends failed. nil → nil.
func Permanent(err error) error { return steer(PermanentInput, err, 0) }

// Misconfigured marks err as PermanentConfig (configuration, credentials or
// permission): the task is parked for a person. nil → nil.
func Misconfigured(err error) error { return steer(PermanentConfig, err, 0) }

// Uncertain marks err as UnknownOutcome: the side effect may have happened,
// so the task must not be blindly re-sent. nil → nil.
func Uncertain(err error) error { return steer(UnknownOutcome, err, 0) }

// ErrRequestNotSent is a sentinel an adapter wraps to say "the request never
// left this process" (e.g. a rate limiter's wait hit the deadline, or the
// body could not be built). Whatever else the chain holds, such an error is
// Transient and safe to retry.
var ErrRequestNotSent = errors.New("retrypolicy: request not sent")

// ErrActed is a sentinel an adapter wraps to say "the provider acted on the
// request" although the call failed: it answered 2xx and generated (and
// billed) what cannot be used, e.g. a generation stopped by a content
// filter. Whatever class the error is steered to, it is no refusal
// ([Refused]).
var ErrActed = errors.New("retrypolicy: the provider acted on the request")

// maxBodyInError bounds how much of StatusError.Body appears in Error().
const maxBodyInError = 256

// StatusError is an HTTP response that was not a success, for adapters of
// HTTP providers. [Classify] reads StatusCode and RetryAfter.
type StatusError struct {
	// StatusCode is the HTTP status code.
	StatusCode int
	// RetryAfter is the parsed Retry-After header (see [ParseRetryAfter]); 0
	// if none.
	RetryAfter time.Duration
	// Body is a short excerpt of the response body. The adapter must put only
	// text that is safe to log here (no credentials, no task text); Error()
	// truncates it further.
	Body string
}

// Error returns "http <code>" followed by a truncated body, if any.
func (e *StatusError) Error() string {
	msg := "http " + strconv.Itoa(e.StatusCode)
	if e.Body == "" {
		return msg
	}
	return msg + ": " + truncate(e.Body, maxBodyInError)
}

// truncate cuts s to at most n bytes on a rune boundary, replacing invalid
// UTF-8, and marks the cut.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// maxRetryAfter caps what ParseRetryAfter returns: a server asking for more
// than this is treated as asking for this.
const maxRetryAfter = time.Hour

// httpDateLayouts are the three date forms RFC 9110 §5.6.7 says recipients
// must accept, preferred form first.
var httpDateLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",  // IMF-fixdate
	"Monday, 02-Jan-06 15:04:05 GMT", // RFC 850
	"Mon Jan _2 15:04:05 2006",       // asctime
}

// ParseRetryAfter parses a Retry-After header value, either delay-seconds or
// an HTTP-date (relative to now). It returns 0 if v is absent or invalid, 0 for
// negative delays or dates in the past, and at most one hour.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(maxRetryAfter/time.Second) {
			// Only overflow fails here: v is all digits.
			return maxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	for _, layout := range httpDateLayouts {
		t, err := time.Parse(layout, v)
		if err != nil {
			continue
		}
		d := t.Sub(now)
		return min(max(d, 0), maxRetryAfter)
	}
	return 0
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
