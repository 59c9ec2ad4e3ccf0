// Package simulated is a deterministic, seeded stand-in for an LLM provider,
// with fault injection and an idempotency ledger that counts real side
// effects. It is the default provider for local runs and tests.
//
// A request's documents are read: the reply text carries, after its
// prefix, "[read document-N <format> sha256:<hex> bytes:<n>]" per document,
// hashed over the bytes received (documents.go), so tests can assert the
// provider saw the exact uploaded bytes.
//
// # Side effects and idempotency
//
// A "side effect" is a generation the provider performed (and, for a real
// provider, billed). The ledger is keyed by Request.OperationID: the first
// generation for an operation is recorded and counted; a later Generate with
// the same operation id returns the recorded Result and counts nothing, the
// way a provider that honours idempotency keys behaves (HonoursIdempotencyKey
// reports true). With Options.NoIdempotency every generation is a new side
// effect, and its text differs from the previous one, so a duplicate or a
// silently replaced result is visible in tests. Counters (SideEffects,
// TotalSideEffects, Calls, Snapshot) let tests assert "exactly once".
//
// # Faults
//
// The faults are [AcceptLoseReply] (the generation happens and is recorded,
// then the reply is "lost": retrypolicy.Uncertain), [Throttle] (429,
// retrypolicy.Throttled with Options.ThrottleRetryAfter), [ServerError] (503,
// retrypolicy.Retryable), [BadRequest] (400, retrypolicy.Permanent),
// [Credentials] (401, retrypolicy.Misconfigured) and [Slow] (the call takes
// Options.SlowDelay, long enough to outlive a lease, then succeeds if that
// fits the call timeout). A call interrupted by its context while the
// provider is "working" — cancelled, or past Options.CallTimeout (the call
// timeout it declares to the worker, DefaultCallTimeout if unset) — returns
// retrypolicy.Uncertain, as a real client would, yet records nothing, so a
// later Lookup credibly answers ErrNotFound.
//
// Two more faults are script-only (not "simulate" values): [Long] (the call
// takes Options.LongDelay, then succeeds: long relative to what is left of
// an invocation) and [Oversized] (the generation's output is larger than
// Options.OversizeBytes, by default above DynamoDB's 400 KB item limit).
//
// # Events
//
// Every call that reaches the provider is an [Event] from its start, with
// its [Outcome] once it ends: performed (reply delivered), lost_reply
// (performed, reply lost), interrupted (cut by the caller's context:
// nothing performed, but the caller cannot know), rejected (a definite
// error: nothing performed). Every Lookup is an event too (found,
// not_found, no_readback). Events, Starts and Results (every generation's
// result) let the soak check that a provider without idempotency is never
// called again after an uncertain outcome unless a readback proved absence,
// and that "the provider may have acted" is never said of a task no call
// reached.
//
// One fault at most applies to a call, chosen in this order:
//
//  1. a per-operation script (Provider.Script), consumed one fault per call;
//  2. the input's "simulate" field: transient and uncertain faults on the
//     first attempt only (so a demo task recovers), permanent ones
//     (bad_request, credentials) on every attempt;
//  3. seeded rates (Options.Faults, see ParseFaultPlan), drawn from a hash of
//     (seed, operation id, attempt), so a run is reproducible whatever the
//     goroutine interleaving.
//
// # Output
//
// The generated text is derived from the seed, a hash of the system and user
// prompts, the operation id and the side-effect number. It never contains
// the prompt; it names the prompt's short SHA-256 prefix.
package simulated
