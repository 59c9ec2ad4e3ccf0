package retrypolicy

import (
	"errors"
	"slices"
)

// Refused reports whether a failed call was turned away in so many words,
// so the provider (or destination) certainly did not act on it: never
// sent (ErrRequestNotSent, a dial failure), or answered with a status that
// says the request was not performed — a 4xx, 429 and 408 included, or an
// AWS throttling code. Anything else that was sent may have acted:
//
//   - 3xx: a 303 See Other is how a server that processed a POST answers;
//   - 409: under an idempotency key, an earlier request with the same key
//     is still being processed;
//   - 424 (Bedrock's ModelErrorException): the model failed while
//     processing the request;
//   - 5xx: a gateway's 502 may follow a generation;
//   - [ErrActed]: a 2xx whose generation cannot be used (a content filter);
//   - an unknown outcome, an unclassified error.
//
// The status the response carried decides, whatever class an adapter
// steered the error to (a webhook steers a 3xx to Misconfigured, Bedrock
// its throttle to Throttled without a StatusError); without a response, a
// class an adapter steered to PermanentInput or PermanentConfig (a request
// refused before it was sent: an invalid input, an unreadable secret) is a
// refusal. The worker charges a refused call nothing and lets what it
// learned settle an assignment the reconciler reached first; an unrefused
// one is charged its reservation and left to the reconciler's readback or
// park.
func Refused(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrRequestNotSent) {
		return true
	}
	if errors.Is(err, ErrActed) {
		return false
	}
	c := DefaultClassifier(err)
	if c.Class == UnknownOutcome {
		return false
	}
	if code, ok := statusOf(err); ok {
		return code >= 400 && code < 500 && code != 409 && code != 424
	}
	var ec errorCoder
	if errors.As(err, &ec) && slices.Contains(throttleCodes, ec.ErrorCode()) {
		return true
	}
	return c.Class == PermanentInput || c.Class == PermanentConfig || isDialError(err)
}

// statusOf returns the HTTP status a response error in err's chain carries
// (a *StatusError, else an HTTPStatusCode method), for Classify and
// Refused.
func statusOf(err error) (int, bool) {
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode, true
	}
	var hs httpStatuser
	if errors.As(err, &hs) && hs.HTTPStatusCode() > 0 {
		return hs.HTTPStatusCode(), true
	}
	return 0, false
}
