// Package ledger is taskledger's DynamoDB task ledger and dead-letter review table.
//
// # Model
//
// One item per task in the tasks table, keyed by task_id. The id is derived
// from (scope, idempotency key) — see Ledger.TaskID: HMAC-SHA256 under the
// server secret Config.IDKey, so an id cannot be computed from a key — and
// deduplicating a submission is a single conditional PutItem
// (attribute_not_exists(task_id)). A replay
// with the same payload hash returns *DuplicateError carrying the existing
// task; another payload under the same key returns *PayloadMismatchError and
// writes nothing.
//
// Every state change is one conditional UpdateItem (or, for parking, one
// TransactWriteItems with the review item). A worker owns a task through its
// assignment_version, the fencing token: Claim increments it, and Renew,
// Complete, ScheduleRetry, Fail and MarkUnknown are all conditioned on
// "assignment_version = mine AND state = running". A worker that lost its
// lease gets *FencedError and must save nothing.
//
// States: queued, running, retry_wait, unknown (live; indexed) and completed,
// failed, cancelled (terminal; TTL set) and needs_review (parked; waits for a
// person, not indexed). Live tasks carry state_shard = "<state>#<nn>" and
// due_at (epoch ms) for the sparse by_state index; terminal and parked tasks
// REMOVE both, so the reconciler's reads grow with live work, not history.
//
// # Errors
//
// Methods return typed errors a caller inspects with errors.As:
// *DuplicateError, *PayloadMismatchError, *FencedError, *NotClaimableError,
// *ConflictError, *ThrottledError, and ErrNotFound (errors.Is). Anything else
// is an unexpected AWS error, wrapped with the operation name.
//
// # Emulators
//
// ReturnValuesOnConditionCheckFailure=ALL_OLD is requested on every
// conditional write; where the engine omits the old item (kumo), the ledger
// falls back to a strongly consistent GetItem before deciding what happened.
package ledger
