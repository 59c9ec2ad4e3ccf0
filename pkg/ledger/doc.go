// Package ledger is taskledger's DynamoDB task ledger and dead-letter review table.
//
// # Model
//
// One item per task in the tasks table, keyed by task_id. The id is derived
// from (scope, idempotency key) under the server secret Config.IDKey
// (Ledger.TaskID), so deduplicating a submission is a single conditional
// PutItem (attribute_not_exists(task_id)). A replay with the same payload
// hash returns *DuplicateError carrying the existing task; another payload
// under the same key returns *PayloadMismatchError and writes nothing.
//
// The task state machine is one table (Transitions, table.go; rendered as
// docs/states.md): each write of a task item is a row naming its actor,
// from-states, fence, guards, to-state, attempt and version changes, what
// a refusal returns and what it does to the review item. Each write's
// ConditionExpression is built from its row's guards, and so are the Go
// predicates that explain a refusal (Transition.Allows, CancelledAt,
// CancelPending, ParkedAt); testdata/conditions.golden pins every one.
//
// A worker owns a task through its assignment_version, the fencing token:
// Claim increments it and the worker's writes are fenced on it; a worker
// that lost its lease gets *FencedError and must save nothing — except
// what the rows from unknown and the lapsed settlements (lapsed.go) let it
// settle. A cancel while running bumps the token (cancel.go).
//
// # Lost replies
//
// A write whose reply is lost may have been applied. Every conditional
// UpdateItem (and every transaction of a task) sets a fresh write_nonce, as
// Create sets create_nonce. When the write's condition then fails (the SDK
// retried a write that had already applied) or the call fails ambiguously
// (a timeout, a 5xx after the SDK's retries), the ledger looks at the item
// — the ALL_OLD the failed condition returned, or a consistent read, tried
// a few times with jittered backoff — and a matching nonce means the write
// was this call's own: it returns the task as written. A caller that
// repeats a settling write after an error passes the same nonce each time
// (WithNonce, NewNonce), so a send applied late is still recognised. A
// claim that stays unconfirmed is given back with ReleaseClaim.
//
// # Attempt history
//
// Task.History tells what each attempt did (claimed, call started, ended,
// outcome, provider reference) without a write of its own (history.go):
// claims set claimed_ms, the call-start mark call_started_ms, and the
// writes that end an attempt with another to follow (ScheduleRetry,
// MarkUnknown, RetryLapsed), given the caller's task (InAttempt), rewrite
// attempt_log with its entry — at most max_attempts. The latest attempt is
// read from the item, so a task completed at its first attempt carries
// claimed_ms alone.
//
// # Item size
//
// DynamoDB refuses items over 400 KB (package itemsize computes sizes).
// CheckCompletion sizes the task as a completion would leave it; Complete
// refuses a write whose key and values alone exceed the limit. Both return
// *ItemTooLargeError, as does DynamoDB's item-size ValidationException.
//
// # States and retention
//
// Live states (queued, running, retry_wait, unknown, awaiting_approval)
// carry state_shard = "<partition>#<nn>" and due_at (epoch ms) for the
// sparse by_state index; terminal (completed, failed, cancelled, rejected)
// and parked (needs_review) tasks REMOVE both, so the reconciler's reads
// grow with live work, not history. queued and running share the partition
// "active" (PartitionOf): a claim keeps both attributes, and the index
// projects nothing a claim or a renewal changes, so neither bills an index
// write.
//
// Terminal tasks carry expires_at (end + Retention) for DynamoDB's TTL.
// Until the sweeper deletes the item, Create treats an expired item as
// absent and writes a fresh task under the same id, conditioned on the
// expired item read and keeping its assignment_version: the fencing token
// of a task id never goes backwards. Retention is at least MinRetention,
// longer than any Lambda invocation, so no holder of a deleted item's
// token is still running.
//
// # Approval gates
//
// A task created with NewTask.ApprovalTTL has an approval gate. Every
// completion of it saves the result the same fenced way and lands in
// awaiting_approval (the "_gated" rows), indexed with due_at = the approval
// deadline. Approve writes the approval and one deliver task per plan entry
// (keyed DeliveryKey) in ONE TransactWriteItems; Withdraw cancels every
// still-unstarted delivery and returns the task to awaiting_approval.
//
// # Follow-ups
//
// A settling write can carry the tasks it causes (WithFollowUps; Park's
// ParkOptions.FollowUps): the deliveries of a plan that delivers without
// approval, created with the completion, and the notifications of a
// completion, a failure, a park or a task entering awaiting_approval. They
// are put (attribute_not_exists, row follow_up) in ONE TransactWriteItems
// with the write, whose condition is its row's ("_follow_ups" twins), and
// chosen by the state the write leaves, so a completion whose approval
// gate is corrected from the item creates the follow-ups of the corrected
// state. Never a completion without its deliveries, never a delivery
// without the saved result; a lost reply is recognised by write_nonce as
// for any write. Without follow-ups a write is the one UpdateItem it was.
//
// # Errors
//
// Methods return typed errors a caller inspects with errors.As:
// *DuplicateError, *PayloadMismatchError, *FencedError, *NotClaimableError,
// *ConflictError, *ThrottledError, *ItemTooLargeError, and ErrNotFound
// (errors.Is). Anything else is an unexpected AWS error labelled with the
// operation that got it ("ledger: UpdateItem complete: ..."), never a
// fence; IsValidation tells a request that no repeat can fix.
//
// # Emulators
//
// ReturnValuesOnConditionCheckFailure=ALL_OLD is requested on every
// conditional write; where the engine omits the old item (kumo), the
// ledger falls back to a consistent GetItem (marked calltag.StandIn, so call counters count it apart).
package ledger
