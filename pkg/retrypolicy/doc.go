// Package retrypolicy decides what a failed attempt means and when, if ever,
// the task may be tried again. It is pure: no AWS SDK, no network, no clock of
// its own (callers pass now) and an injectable random source.
//
// # Failure classes
//
// Every error from a provider or a dependency is reduced to one [Class], which
// picks the task's next state (DESIGN.md §3):
//
//	class            meaning                            task goes
//	Transient        retry later with backoff           running → retry_wait
//	PermanentInput   the caller's input is at fault     running → failed
//	PermanentConfig  config, credentials, permission    running → needs_review
//	UnknownOutcome   the side effect may have happened  running → unknown
//
// UnknownOutcome exists because "unknown is not failed": a timeout after the
// request was written may hide an accepted request. Such a task is resolved by
// reading the provider back, never by blindly sending again.
//
// # Steering
//
// Code that knows better than the generic rules says so by wrapping its error:
// [Retryable], [Throttled] (with a Retry-After floor), [Permanent],
// [Misconfigured] and [Uncertain] all return an [*Error], and an *Error
// anywhere in the chain overrides every other rule. An adapter that can prove
// the request never left the process wraps [ErrRequestNotSent], which makes
// even a deadline safe to retry. HTTP adapters return a [*StatusError] (see
// [ParseRetryAfter] for the header).
//
// # One choke point
//
// All classification goes through [DefaultClassifier] (initially [Classify]),
// so a deployment or a test can replace the rules in one place. Classify tries,
// first match wins: a steering *Error; a known AWS error code (matched through
// an ErrorCode() string method, as smithy.APIError has); an HTTP status (from
// *StatusError or an HTTPStatusCode() int method); network and context errors;
// and finally "unclassified", which is Transient. AWS codes are looked at
// before the status because AWS reports throttling and conditional-check
// failures as HTTP 400, which on its own would read as the caller's fault.
//
// Unclassified errors are retried rather than failed because an unknown error
// is most often local (a bug, a closed client, an unexpected wrapper) and the
// attempt and age budgets bound the cost. A provider that cannot tell whether
// its side effect happened must say so with [Uncertain]; the generic rules
// cannot guess that.
//
// # Backoff and budgets
//
// [Policy.Backoff] is "full jitter": a uniform draw in
// [0, min(Cap, Base·2^attempt)], raised to the Retry-After floor (itself never
// above MaxAge). It is safe for any attempt number. [Policy.Budget] says
// whether a task has used up its attempts or its age, and [Policy.FitsAge]
// whether a planned retry would still start inside the age budget; a task
// that does not fit is parked with reason budget_exhausted instead of looping.
package retrypolicy
