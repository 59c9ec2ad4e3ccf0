// Package ledger is taskledger's DynamoDB task ledger and dead-letter review table.
//
// # Model
//
// One item per task in the tasks table, keyed by task_id, derived from
// (scope, idempotency key) under the server secret Config.IDKey
// (Ledger.TaskID): deduplicating a submission is one conditional PutItem
// (a replay: *DuplicateError; another payload: *PayloadMismatchError).
//
// The task state machine is one table (Transitions, table.go; rendered as
// docs/states.md, explained in docs/protocol.md): each write of a task
// item is a row. Each write's condition is built from its row's guards,
// and so are the Go predicates that explain a refusal (Transition.Allows,
// CancelledAt, CancelPending, ParkedAt); testdata/conditions.golden pins
// every one.
//
// # Versions
//
// A worker owns a task through its assignment_version, the fencing token:
// Claim increments it and a cancel while running (CancelRunning) bumps it.
// Every version argument of a write is the assignment_version the write
// must find — its condition is assignment_version = version — and is
// never computed by the caller: a worker passes the version its claim
// returned, or, settling what a cancel did to its task (CompleteCancelled,
// CancelUnknown, CancelLapsed, CompleteLapsed of the cancel's park), the
// version of the task its refused write found; the reconciler, the API and
// an operator pass the version they read. A worker that lost its lease
// gets *FencedError and saves nothing but what the rows from unknown and
// the lapsed settlements (lapsed.go) let it settle.
//
// # Lost replies
//
// A write whose reply is lost may have been applied. Every conditional
// write of a task sets a fresh write_nonce (Create: create_nonce). When its
// condition then fails or the call fails ambiguously, the ledger looks at
// the item (ALL_OLD, or consistent reads with jittered backoff); a
// matching nonce means the write was this call's own, and the task is
// returned as written. A caller repeating a settling write passes the same
// nonce (WithNonce, NewNonce). An unconfirmed claim is given back with
// ReleaseClaim.
//
// # Attempt history
//
// Task.History tells what each attempt did without a write of its own;
// see history.go.
//
// # Item size
//
// DynamoDB refuses items over 400 KB (package itemsize). CheckCompletion
// sizes the task as a completion would leave it; Complete refuses a write
// whose key and values alone exceed the limit. Both return
// *ItemTooLargeError, as does DynamoDB's item-size ValidationException.
//
// # States and retention
//
// Live states (queued, running, retry_wait, unknown, awaiting_approval)
// carry state_shard = "<partition>#<nn>" and due_at (epoch ms) for the
// sparse by_state index; terminal and parked tasks REMOVE both, so the
// reconciler's reads grow with live work, not history. queued and running
// share the partition "active" (PartitionOf), and the index projects
// nothing a claim or a renewal changes, so a claim from queued bills no
// index write, nor does a renewal that keeps due_at (runningDue rounds it
// to whole leases); a claim from retry_wait (row claim_retry) moves the
// key to "active".
//
// The reads of by_state and of the review table's open_reviews index
// (the reconciler's walk and counts, the overview, the operators' review
// list) are read models in internal/tasklist; the ledger writes what they
// read.
//
// With a watch table (Config.WatchTable, watch.go) a submitted task has
// no state_shard until the reconciler, at its dispatch deadline, finds it
// still queued or running and adopts it (row adopt): one that ends first
// bills no index write.
//
// Terminal tasks carry expires_at (end + Retention) for DynamoDB's TTL.
// Create treats an item past it as absent and writes a fresh task under
// the same id, keeping its assignment_version: the fencing token of a task
// id never goes backwards. Retention is at least MinRetention, longer than
// any Lambda invocation, so no holder of a deleted item's token still runs.
//
// # Approval gates and follow-ups
//
// A task created with NewTask.ApprovalTTL has an approval gate: every
// completion saves the result the same fenced way and lands in
// awaiting_approval (the "_gated" rows). Approve writes the approval and
// one deliver task per plan entry (keyed DeliveryKey) in ONE
// TransactWriteItems; Withdraw cancels every still-unstarted delivery and
// returns the task to awaiting_approval.
//
// A settling write can carry the tasks it causes (WithFollowUps,
// ParkOptions.FollowUps) — a plan's deliveries, notifications — chosen by
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
//
// # Emulators
//
// Every conditional write asks for ReturnValuesOnConditionCheckFailure=
// ALL_OLD; where the engine omits the old item (kumo), the ledger reads it
// (calltag.StandIn, so call counters count it apart).
package ledger
