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
// lease gets *FencedError and must save nothing. Complete — and, after a
// refusal in so many words (AfterRefusal), ScheduleRetry and Fail — also
// accept state unknown at the caller's own version (the reconciler expired
// the lease of a worker that was slow but alive; no other attempt
// started), so what that worker learned — a result, a refusal — still
// settles the task; ReleaseUnknown gives such an assignment back when its
// worker made no call at all. When the reconciler has
// already parked that task unknown_outcome (no readback) at the same
// version, the attempt's real outcome settles the park in one
// TransactWriteItems of task and review item, fenced the same way (state
// needs_review, review_reason unknown_outcome, review still open):
// CompleteLapsed saves the result (review resolved completed), FailLapsed
// fails a rejected input (resolved failed), RetryLapsed schedules the retry
// of a transient refusal (resolved retry), ReleaseLapsed re-queues an
// assignment that made no call, its attempt given back (resolved retry),
// CancelLapsed ends cancelled the park of a cancel while running whose
// worker knows the provider did not act (resolved cancelled), and
// ReviseLapsed turns the open
// review into result_too_large or result_not_saved when the result cannot
// be saved. ReviseLapsedReview revises the review item alone (conditioned
// on its park_count) when that transaction keeps failing. MarkCallStarted,
// fenced like Renew, records call_started_version just before a provider
// call that could neither be deduplicated nor read back, so an expired
// lease without it is known not to have reached the provider; with at
// least half a lease left it writes nothing else (no by_state index write),
// with less it renews the lease too. Renew sets due_at to the next whole
// multiple of the lease at or after the new lease end, so a heartbeat
// moves the index key once a lease instead of at every beat.
// WaitAdmission gives a claimed task back to retry_wait until the time
// provider admission names (the earliest slot at which the call fits), the
// attempt given back (admission.go). CancelRunning cancels a running task,
// or an unknown one with no cancel at its version, by bumping its fencing
// token: the task goes to unknown with cancel_version = the fenced version,
// and the reconciler ends it with CancelUnknown (cancelled) once it knows
// the provider did not act, or by the usual unknown rules; the fenced
// worker that already holds the provider's reply saves it with
// CompleteCancelled (completed, error class cancel_too_late) (cancel.go).
//
// # Lost replies
//
// A write whose reply is lost may have been applied. Every conditional
// UpdateItem (and Park's transaction) sets a fresh random write_nonce, as
// Create sets create_nonce. When the write's condition then fails (the SDK
// retried a write that had already applied: a claim now "leased" by itself,
// a completion "already completed" by itself) or the call fails ambiguously
// (a timeout, a 5xx after the SDK's retries), the ledger looks at the item —
// the ALL_OLD the failed condition returned, or a consistent read, tried a
// few times with jittered backoff — and a matching nonce means the write
// was this call's own: it returns the task as written instead of an error.
// Callers therefore see a lost reply on Claim, Complete, ScheduleRetry,
// MarkUnknown, Fail, Release, Requeue, ExpireToUnknown, MarkCallStarted,
// Park and the lapsed settlements as the success it was. A caller that repeats a settling
// write after an error passes the same nonce each time (WithNonce,
// NewNonce), so a send applied late is still recognised. A claim that stays
// unconfirmed (its reads kept failing) is given back with ReleaseClaim,
// conditioned on the lease owner.
//
// # Item size
//
// DynamoDB refuses items over 400 KB (package itemsize computes its
// sizes). CheckCompletion sizes the task as a completion would leave it, so
// callers can decide before writing; Complete itself refuses a write whose
// key and values alone exceed the limit. Both return *ItemTooLargeError, as
// does a ValidationException about the item size from DynamoDB.
//
// # Retention
//
// Terminal tasks carry expires_at (epoch seconds, end + Retention) for
// DynamoDB's TTL. The sweeper may delete an item days later; until then,
// Create treats an item whose expires_at has passed as absent and writes a
// fresh task under the same id — conditioned on the expired item read (its
// expires_at and assignment_version) and keeping its assignment_version, so
// the fencing token of a task id never goes backwards and a worker still
// holding a version of the old task cannot complete the new one. Retention
// is at least MinRetention (1 hour, longer than any Lambda invocation), so
// by the time TTL deletes an item no holder of its token is still running.
//
// States: queued, running, retry_wait, unknown, awaiting_approval (live;
// indexed) and completed, failed, cancelled, rejected (terminal; TTL set)
// and needs_review (parked; waits for a person, not indexed). Live tasks carry state_shard = "<state>#<nn>" and
// due_at (epoch ms) for the sparse by_state index; terminal and parked tasks
// REMOVE both, so the reconciler's reads grow with live work, not history.
//
// # Approval gates
//
// A task created with NewTask.ApprovalTTL has an approval gate
// (approval_required; the plan is kept as JSON). Every completion —
// Complete, CompleteFromReadback, CompleteLapsed — saves the result and
// its result_sha256 the same fenced way, and lands a gated task in
// awaiting_approval, indexed with due_at = the approval deadline, instead
// of completed; the write is conditioned on the item's gate, and a caller
// that misjudged it (Completion.ApprovalTTL) is corrected once from the
// item. Approve writes the approval and one deliver task per plan entry
// (ordinary queued tasks, keyed DeliveryKey in the task's scope) in ONE
// TransactWriteItems, conditioned on awaiting_approval, the approved hash
// and the approval round; the same approval again is a replay. Reject ends
// the task rejected. Withdraw cancels every still-unstarted delivery
// (queued at version 0) and returns the task to awaiting_approval in one
// transaction, or returns *DeliveriesStartedError. ExpireApproval parks a
// task whose deadline passed (approval_expired). Decisions set write_nonce:
// a lost reply is recognised as the caller's own write.
//
// # Errors
//
// Methods return typed errors a caller inspects with errors.As:
// *DuplicateError, *PayloadMismatchError, *FencedError, *NotClaimableError,
// *ConflictError, *ThrottledError, *ItemTooLargeError, and ErrNotFound
// (errors.Is). Anything else is an unexpected AWS error, labelled with the
// operation that got it ("ledger: UpdateItem complete: ValidationException
// ..."), never as a fence; IsValidation tells a request that no repeat can
// fix.
//
// # Emulators
//
// ReturnValuesOnConditionCheckFailure=ALL_OLD is requested on every
// conditional write; where the engine omits the old item (kumo), the ledger
// falls back to a strongly consistent GetItem before deciding what happened.
package ledger
