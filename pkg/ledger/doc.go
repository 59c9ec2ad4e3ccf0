// Package ledger is taskledger's DynamoDB task ledger and dead-letter review table.
//
// # Model
//
// One item per task in the tasks table, keyed by task_id, derived from
// (scope, idempotency key) under the server secret Config.IDKey
// (Ledger.TaskID): a submission is deduplicated by one conditional PutItem
// (a replay: *DuplicateError; another payload: *PayloadMismatchError).
//
// The task state machine is one table (Transitions, table.go; rendered as
// docs/states.md, explained in docs/protocol.md): each write of a task
// item is a row. Its condition, and the Go predicates that explain a
// refusal (Transition.Allows, CancelledAt, CancelPending, ParkedAt), are
// built from the row's guards; testdata/conditions.golden pins every one.
//
// # Versions
//
// A worker owns a task through its assignment_version, the fencing token:
// Claim increments it and a cancel while running (CancelRunning) bumps it.
// Every version argument of a write is the assignment_version the write
// must find (its condition is assignment_version = version), never
// computed by the caller: a worker passes the version its claim returned,
// or, settling what a cancel did to its task (CompleteCancelled,
// CancelUnknown, CancelLapsed, CompleteLapsed of the cancel's park), the
// version its refused write found; the reconciler, the API and an operator
// pass the version they read. A worker that lost its lease gets
// *FencedError and saves nothing but what the rows from unknown and the
// lapsed settlements (lapsed.go) let it settle.
//
// # Lost replies
//
// A write whose reply is lost may have been applied. Every conditional
// write of a task sets a fresh write_nonce (Create: create_nonce). When its
// condition then fails or the call fails ambiguously, the ledger looks at
// the item (ALL_OLD, or a read tagged calltag.StandIn where the engine
// omits it, as kumo does; or consistent reads with jittered backoff): a
// matching nonce means the write was this call's own, and the task is
// returned as written. A caller repeating a settling write passes the same
// nonce (WithNonce, NewNonce). ReleaseClaim gives back an unconfirmed claim.
//
// # Attempt history
//
// Task.History tells what each attempt did without a write of its own
// (history.go).
//
// # Item size
//
// DynamoDB refuses items over 400 KB (package itemsize): CheckCompletion
// and Complete return *ItemTooLargeError, as does DynamoDB's refusal.
//
// # States and retention
//
// Live states (queued, running, retry_wait, unknown, awaiting_approval)
// carry state_shard = "<partition>#<nn>" and due_at (epoch ms) for the
// sparse by_state index; terminal and parked tasks REMOVE both, so the
// reconciler's reads grow with live work, not history. queued and running
// share the partition "active" (PartitionOf) and the index projects
// nothing a claim or a renewal changes, so neither a claim from queued nor
// a renewal that keeps due_at (runningDue) bills an index write. Its
// reads, and the review table's open_reviews index, are read models in
// internal/tasklist. With a watch table (watch.go) a submitted task is
// indexed only once adopted (row adopt) or moved by any write but a claim.
//
// Terminal tasks carry expires_at (end + Retention) for DynamoDB's TTL.
// Create treats an item past it as absent and writes a fresh task under
// the same id, keeping its assignment_version, so the fencing token of a
// task id never goes backwards; once TTL deleted the item, no holder of
// its token still runs (MinRetention).
//
// # Approval gates and follow-ups
//
// A task created with NewTask.ApprovalTTL has an approval gate: every
// completion saves the result the same fenced way and lands in
// awaiting_approval (the "_gated" rows); Approve or Reject decides it.
// A settling write can carry the tasks it causes (WithFollowUps,
// ParkOptions.FollowUps: a plan's deliveries, notifications), chosen by
// the state it leaves and put (row follow_up) in ONE TransactWriteItems
// with the write ("_follow_ups" twins): never a completion without its
// deliveries, never a delivery without the saved result.
//
// # Errors
//
// Methods return typed errors a caller inspects with errors.As:
// *DuplicateError, *PayloadMismatchError, *FencedError, *NotClaimableError,
// *ConflictError, *ThrottledError, *ItemTooLargeError, and ErrNotFound
// (errors.Is). Anything else is an AWS error labelled with the operation
// that got it ("ledger: UpdateItem complete: ..."), never a fence;
// IsValidation tells a request that no repeat can fix.
package ledger
