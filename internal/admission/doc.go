// Package admission is provider admission control: requests per minute and
// tokens per minute per model, shared by every worker instance through
// conditional writes on the existing tasks table (DESIGN §13).
//
// # Model
//
// Time is cut into fixed windows (one minute by default), each cut into
// slots (Config.Slots, default 12: 5 s). The count of a model's window is
// one item in the tasks table, keyed
//
//	task_id = "adm#<model>#<window start, epoch seconds>"
//
// which can never collide with a task ("t_" + 26 base32 characters, see
// ledger.TaskID) nor with a poison-message review id ("msg_..."). The item
// carries requests and tokens (N), the same per slot (r<slot>, k<slot>),
// last_nonce (S) and last_slot (N, the slot of the write that set it),
// sealed (BOOL, once the window is over) and expires_at
// (epoch seconds, the table's TTL attribute: one hour after the window
// ends), and never state_shard or due_at, so it is not in the by_state
// index and the reconciler never sees it. Code that Scans the tasks table
// (the soak checker, the bench) must skip keys that do not start with "t_".
//
// # No span of a window's length holds more than the limit
//
// Counting calendar minutes alone admits the limit in the last second of
// one minute and again in the first second of the next: twice the limit
// within two seconds, which a provider counting a rolling minute refuses.
// So an admit in slot j of window W also
// counts the previous window's slots j..end — every call that may lie in
// the 60 s ending now:
//
//	W.requests + sum(W-1.r[j:]) < rpm  AND  W.tokens + est + sum(W-1.k[j:]) <= tpm
//
// W-1's counts are final: the first Admit of a model in a window seals the
// previous one (one UpdateItem SET sealed, returning the item, cached for
// the window — so one extra write per Admitter instance, model and window);
// every admit is conditioned on attribute_not_exists(sealed), so a late
// writer (another instance whose clock is still in W-1) is refused rather
// than counted after the seal. The previous window's part is computed
// here and folded into the condition's constants. The price of the bound:
// a slot counted on both sides, so sustained demand gets at least
// slots/(slots+1) of the limit (12/13 with 5 s slots). A refusal names the
// earliest slot at which the call could fit (or the next window):
// RetryAt, from the counts DynamoDB returns with the failed condition
// (ReturnValuesOnConditionCheckFailure; an engine that returns none gets
// the next window). When the previous window alone leaves no room the
// refusal is decided without a write.
//
// [Admitter.Admit] reserves one request and the call's estimated tokens with
// ONE UpdateItem on the happy path:
//
//	ADD requests :1, tokens :est, r<j> :1, k<j> :est  SET expires_at = if_not_exists(...), last_nonce = :nonce, last_slot = j
//	IF attribute_not_exists(sealed) AND (attribute_not_exists(requests) OR (requests < :rpm AND tokens <= :room))
//
// (:rpm and :room are the limits less the previous window's part and the
// estimate, computed here: condition expressions have no arithmetic).
// A failed condition is the answer "not now": a [*NotAdmittedError] with
// RetryAt. Waiting for admission must not
// consume an attempt — that is the caller's rule: the worker puts the task
// back (not_before = RetryAt) without counting it as a failure.
// An estimate larger than the per-minute token limit can never be admitted:
// [*EstimateTooLargeError], a configuration problem, not a wait. A model
// without configured limits is [*UnknownModelError].
//
// [Admitter.Settle] corrects the window (and the ticket's slot) by actual -
// estimated tokens once the provider reported usage (one UpdateItem, none
// when they are equal; conditioned on the window item still existing so an
// expired window is never resurrected without its TTL). Estimates are the
// most a call can use (the worker's is contract.CallMaximumWith, documents
// included), so a
// correction after the seal only lowers a count others already hold: the
// cached view stays on the safe side.
//
// # Cost per admitted call
//
// One UpdateItem (1 write unit: the item stays far below 1 KB), plus one
// UpdateItem at Settle when the usage differs from the estimate: at most
// 2 calls and 2 write units per admitted provider call, plus the seal: one
// UpdateItem per Admitter instance, model and minute. A refusal is also one
// UpdateItem (DynamoDB charges a failed conditional write 1 write unit),
// or none when the previous window alone decides it.
//
// # Lost replies and the bound
//
// An Admit whose reply is lost (a timeout; internal/faultinject's LostReply in tests) may or
// may not have counted. It is retried (at most Config.MaxAttempts writes in
// all) with the SAME nonce and the condition "last_nonce <> :nonce"; if that
// condition is what failed, the returned (or consistently re-read) item
// still carries our nonce, so the first write landed and nobody wrote since:
// we are admitted, counted once — in the slot that write was sent in
// (last_slot), which the ticket names even when the retry runs in a later
// slot: Release and Settle correct that slot, and the call must start
// before it ends (a ticket already past it is admitted again). If another
// instance wrote in between, our
// nonce is gone and the retry reserves again: the window over-counts by at
// most ONE call's reservation per lost reply. Over-counting is the safe
// side: the provider never sees more than the limit; we only lose capacity.
// A call is never made on an unrecorded reservation.
//
// Settle is not retried (ADD is not idempotent): a lost Settle reply leaves
// the window at the estimate (if it did not land), an error of at most
// |actual - estimated| tokens for that window.
//
// # Calls that are not made, or start late
//
// [Admitter.Release] gives back a ticket whose call was never made (the
// worker's budget parked the task, or its call-start mark was refused): one
// conditional UpdateItem taking the request and the estimate out of the
// window and the slot, not retried (a lost Release keeps the count, the
// safe side). A call is counted in its admit's slot, so it must start
// before [Ticket.ValidUntil], the slot's end; one that could not (a
// throttled write repeated in between) is released and admitted again —
// sent later, it could meet within 60 s at the provider a call admitted a
// minute after its slot.
//
// # Settings (settings.go)
//
// The per-model limits are configured as JSON in PROVIDER_ADMISSION (EnvVar;
// ParseSettings, strict). The worker admits its calls by them; the submit
// function reads the same settings (lambdaenv.LoadProvider) and refuses a
// task whose call bound exceeds its model's tokens_per_minute — an
// Admit that could only answer EstimateTooLargeError.
package admission
