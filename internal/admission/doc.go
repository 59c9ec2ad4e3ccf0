// Package admission is provider admission control: requests per minute and
// tokens per minute per model, shared by every worker instance through
// conditional writes on the existing tasks table (issue 14, DESIGN §13; not
// yet wired into the worker).
//
// # Model
//
// Time is cut into fixed windows (one minute by default). The count of a
// model's window is one item in the tasks table, keyed
//
//	task_id = "adm#<model>#<window start, epoch seconds>"
//
// which can never collide with a task ("t_" + 26 base32 characters, see
// ledger.TaskID) nor with a poison-message review id ("msg_..."). The item
// carries requests (N), tokens (N), last_nonce (S) and expires_at (epoch
// seconds, the table's TTL attribute: one hour after the window ends), and
// never state_shard or due_at, so it is not in the by_state index and the
// reconciler never sees it. Code that Scans the tasks table (the soak
// checker, the bench) must skip keys that do not start with "t_".
//
// [Admitter.Admit] reserves one request and the call's estimated tokens with
// ONE UpdateItem on the happy path:
//
//	ADD requests :1, tokens :est  SET expires_at = if_not_exists(...), last_nonce = :nonce
//	IF attribute_not_exists(requests) OR (requests < :rpm AND tokens <= :tpm - :est)
//
// (:tpm - :est is computed here: condition expressions have no arithmetic).
// A failed condition is the answer "not now": a [*NotAdmittedError] whose
// RetryAt is the start of the next window. Waiting for admission must not
// consume an attempt — that is the caller's rule: the worker puts the task
// back (not_before = RetryAt) without counting it as a failure.
// An estimate larger than the per-minute token limit can never be admitted:
// [*EstimateTooLargeError], a configuration problem, not a wait. A model
// without configured limits is [*UnknownModelError].
//
// [Admitter.Settle] corrects the window by actual - estimated tokens once
// the provider reported usage (one UpdateItem, none when they are equal;
// conditioned on the window item still existing so an expired window is
// never resurrected without its TTL).
//
// # Cost per admitted call
//
// One UpdateItem (1 write unit: the item stays far below 1 KB), plus one
// UpdateItem at Settle when the usage differs from the estimate: at most
// 2 calls and 2 write units per admitted provider call. A refusal is also one
// UpdateItem (DynamoDB charges a failed conditional write 1 write unit).
//
// # Lost replies and the bound
//
// An Admit whose reply is lost (a timeout; internal/faultinject's LostReply in tests) may or
// may not have counted. It is retried (at most Config.MaxAttempts writes in
// all) with the SAME nonce and the condition "last_nonce <> :nonce"; if that
// condition is what failed, the returned (or consistently re-read) item
// still carries our nonce, so the first write landed and nobody wrote since:
// we are admitted, counted once. If another instance wrote in between, our
// nonce is gone and the retry reserves again: the window over-counts by at
// most ONE call's reservation per lost reply. Over-counting is the safe
// side: the provider never sees more than the limit; we only lose capacity.
// A call is never made on an unrecorded reservation.
//
// Settle is not retried (ADD is not idempotent): a lost Settle reply leaves
// the window at the estimate (if it did not land), an error of at most
// |actual - estimated| tokens for that window.
//
// Fixed windows let a burst straddle a boundary (up to twice the limit
// within 60 s across two windows, never more than the limit within one);
// configure limits below the provider's if it enforces a sliding window.
package admission
