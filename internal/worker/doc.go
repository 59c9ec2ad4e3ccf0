// Package worker is the SQS consumer of taskledger (DESIGN.md §6): it turns a
// batch of task messages into fenced attempts against the task ledger and a
// provider, and answers with a partial batch response.
//
// # One record
//
// A message body is a task reference ({"task_id":"t_…"}, see package
// dispatch). For each record, [Handler.Handle]:
//
//  1. parses the body; anything else is a poison message, written to the
//     review table (poison_message, with the message id and the body's
//     SHA-256 and size, never the body) and acknowledged;
//  2. claims the task with one conditional UpdateItem returning ALL_NEW (no
//     read on the happy path; a generate claim refused by an expired lease
//     is followed by ledger.TakeOver). Refused, the ledger says why
//     (notClaimed): a terminal, parked, unknown or leased task is
//     acknowledged without a call; a retry not due goes back with its
//     visibility set to the delay; a task past its budgets is parked
//     budget_exhausted, unless an attempt may have acted unseen (an expired
//     lease, an effect's open outcome): the reconciler decides. A claim
//     whose reply was lost is recognised (write_nonce);
//  3. calls the provider with the task id as operation id (its idempotency
//     key), once the input and documents are read (Payloads in S3), the
//     call admitted (Provider admission), its spend reserved (Spend) and,
//     where needed, its start marked (The call-start mark). A heartbeat,
//     every Lease/3, renews the lease (ledger.Renew, fenced on the
//     assignment version) and extends the message's visibility to 2×Lease.
//     A fenced renewal cancels the call at once (cause [ErrFenced]) and
//     nothing is saved — unless the task is unknown, or parked
//     unknown_outcome, at this worker's own version (stillOurs): the call
//     goes on and its result can still settle the task. A cancel while
//     running (ledger.CancelRunning) bumps the version, so it is met like a
//     takeover (Settling after the lease is lost);
//  4. completes the task conditioned on the assignment version (running,
//     or unknown at the same version); a lost reply is recognised as saved.
//     A rejected completion is never retried: it is logged, or settled when
//     the reconciler or a cancel got there first. A result that would push
//     the item over DynamoDB's 400 KB limit is parked result_too_large
//     without a write; one DynamoDB refuses as invalid, result_not_saved;
//  5. on a provider error, classifies it with retrypolicy.DefaultClassifier:
//     transient → retry_wait with not_before from the Policy's backoff (and
//     Retry-After), the message's visibility set to that delay and a batch
//     item failure; permanent input → failed, with the class and the
//     provider's (safe) message visible to the caller; configuration or
//     credentials → parked for a person (provider_config); uncertain → see
//     below. A retry that would not start within the age budget, or with no
//     attempt left, parks the task (budget_exhausted) instead.
//
// # The call-start mark
//
// When the step does not honour idempotency keys, the call start is
// recorded before the call (ledger.MarkCallStarted, saved like a settling
// write): without it the reconciler could not tell a worker that died after
// its claim from one that died mid-call. A fenced mark is acknowledged
// (settled as uncalled when the lease lapsed at this assignment); one that
// keeps failing releases the task and its attempt. The reconciler
// trusts a readback's "not found" once the lease end plus the call timeout
// has passed, so every call starts inside its lease (leaseForCall): with
// under a heartbeat of it left, the lease is renewed first, and a refused
// or late renewal means no call.
//
// # Spend
//
// A task with a spend budget (spend.go) reserves the call's maximum
// (callMaximum) on its regenerate chain's budget item and its own before
// the call; a budget that cannot cover it parks the task budget_exhausted
// with no call made. With a daily quota, every generate call also reserves
// it on its caller's day item. Both are settled after the call with the
// reported usage (usedBy: a success without a report, or a call sent and
// failed with anything but a refusal in so many words, is charged the full
// reservation; one never sent nothing). A quota held only by calls in
// flight makes the task wait (quotaWaitFor); one the settled usage fills
// parks it budget_exhausted (quota_exceeded). A crashed attempt's
// reservation is settled in full by the task's next attempt, or by
// whatever ends the run (settleEarlierAttempts, parkUncalled, the
// reconciler).
//
// # Uncertain outcomes and effect classes
//
// "Unknown is not failed" (DESIGN §1.4). An uncertain attempt is retried
// like a transient one only when repeating the call is safe (repeatable):
// the provider honours the operation id as an idempotency key (the next
// attempt returns the recorded result; ledger.ScheduleRetryUncertain keeps
// the outcome open until one collects it), or Handler.RetrySafeGeneration
// declares generation retry-safe (DESIGN §14: a repeat costs only money,
// every call is charged). Otherwise, or with no attempt left, the task goes
// to unknown and the reconciler resolves it by readback. The same rule
// decides the takeover of an expired lease (AllowTakeover). A cancel that
// cuts a retry-safe call ends it cancelled at once, its reservation
// charged (knowCharged); its calls are still marked (markCallStarted) for a
// reconciler that treats generation as an effect while a deployment
// changes the class. The zero value treats generation as an effect; the
// functions and make run default to retry-safe (GENERATION_EFFECT_CLASS).
// Deliveries are always effects.
//
// # Settling after the lease is lost
//
// A worker whose lease was lost (the reconciler expired it, or a cancel
// while running fenced it) may still settle what it knows (DESIGN §14),
// through one pure decision, settle (settle.go), from the task as the
// refused write returned it, its assignment version v and what it knows:
//
//	what it knows      unknown at v       parked at v (*)  cancelled at v (**)  that cancel parked (*)
//	a reply            —                  CompleteLapsed   CompleteCancelled †  CompleteLapsed at v+1 †
//	a reply not saved  Park from unknown  ReviseLapsed     —                    —
//	input refused      —                  FailLapsed       CancelUnknown        CancelLapsed
//	retry refused      —                  RetryLapsed      CancelUnknown        CancelLapsed
//	park refused       Park from unknown  ReviseLapsed     CancelUnknown        CancelLapsed
//	no call            ReleaseUnknown     ReleaseLapsed    CancelUnknown ‡      CancelLapsed ‡
//	charged            —                  —                CancelUnknown        CancelLapsed
//	may have acted     —                  —                —                    —
//
//	(*) needs_review, reason unknown_outcome
//	(**) unknown at v+1 with cancel_version v and no result: a cancel while running fenced v
//	† behind an approval gate: CancelUnknown, and nothing from the park (no approval may open after a cancel)
//	‡ on the task's first attempt: after earlier ones, whose calls may have acted, the reconciler reads back
//	"charged": a retry-safe generation's call that may have acted (see Uncertain outcomes and effect classes)
//
// Queued at v with its attempt still counted and its outcome not settled
// by a readback since (ledger.RequeuedAt: the reconciler re-queued the
// lapsed lease), a worker that made no call sends ReleaseRequeued: the attempt is
// given back and the lapse's record voided, so no later review claims a
// call that never started; nothing else is sent from there.
//
// A refusal is one in so many words (retrypolicy.Refused: never sent, a
// 4xx, throttled): the provider did not act; "park refused" is a
// configuration refusal or one with no budget left. Everything else sends
// nothing and is acknowledged (fenced): another version, a cancel of
// another assignment, a settled task, and a call that was sent and may
// have acted (a 5xx, a timeout, an input refused after acting), whose
// outcome stays the reconciler's to read back or park. From unknown at v a
// reply or an input or retry refusal sends nothing: Complete, and Fail or
// ScheduleRetry after a refusal (ledger.AfterRefusal), accept unknown at v
// in the first place. Every transition is conditioned on the place it is
// sent from and repeated like a settling write; the lapsed ones resolve the
// open review as the worker. A give-back refused because the task moved on
// (to unknown, then its park) is sent again from there (uncalled); a
// CompleteLapsed that cannot save the result revises the review
// (reviseLapsed).
//
// # Payloads in S3 (Handler.Payloads)
//
// With a claim-check store (DESIGN §12; payloads.go), an input in S3 is
// read and verified (size, SHA-256) after the claim: S3 unavailable gives
// the claim and its attempt back; an object gone or holding other bytes
// fails the task input_unavailable, so the provider never sees other bytes
// than the submitted ones. Documents (documents.go) are read the same way;
// an instance holds at most DocumentMemory bytes of them (docmemory.go). A
// result above the inline threshold is put at
// results/<task>/<created_ms>/<assignment_version> before the fenced
// completion, which saves only the reference; if S3 stays down, a result
// that fits the item is saved inline, else the task is parked
// result_not_saved. Without a store no S3 call is made.
//
// # Deliver tasks
//
// A deliver task (DESIGN §10) runs through the same steps; only the call
// differs (deliver.go): the destination its input names performs it and
// its receipt becomes the result. The re-send of an uncertain attempt and
// the call-start mark follow the destination's guarantees, and a deliver
// task is never taken over (ledger.ClaimOptions.TakeoverKind).
//
// # Failed settling writes
//
// What the worker learned from the provider lives only in its memory until
// the write that settles the attempt succeeds (a redelivery meets the
// worker's own live lease). So a settling write that is throttled or fails
// ambiguously is repeated in process (save.go), under a heartbeat, with the
// same write nonce, so a send applied late is recognised. When the repeats
// run out, a result is parked result_not_saved with the provider
// reference; every other settling write defers the message and leaves the
// task to its lease (a Release would give back an attempt the provider was
// called for). A claim that may have applied unconfirmed is given back
// (ledger.ReleaseClaim, conditioned on this record's lease owner): the
// redelivery would take it for a live lease.
//
// # Deadlines
//
// Never start a provider call that cannot finish. Every call is bounded by
// its call timeout (Handler.CallTimeout), and work stops DeadlineMargin
// before the Lambda deadline. A record is admitted only when work has at
// least the call timeout left: checked before the claim (not claimed, no
// attempt consumed: outcome not_admitted), after it, and just before the
// call, after the writes between, which a slow DynamoDB can stretch to
// seconds (the task and its attempt are released). A call that runs past
// its call timeout is an uncertain attempt, never a failed one. Records
// run at most Concurrency at a time; with Concurrency at least the batch
// size (docs/timing.md) a full batch fits the function's Timeout.
//
// # Provider admission
//
// With Handler.Admission set (PROVIDER_ADMISSION, admission.go), every
// provider call is admitted against the model's shared per-minute limits
// (internal/admission) after the claim and before the call-start mark.
// Without room, the task waits in retry_wait until the earliest slot that
// fits (ledger.WaitAdmission: the attempt is given back; not_admitted). A
// call admission can never admit is parked provider_config without a
// call; after a successful call the window is corrected by the reported
// usage (a failed one keeps the estimate).
//
// # Partial batch responses
//
// Handle never returns an error for a per-record problem (that would retry
// the whole batch); it lists the message ids to retry in
// BatchItemFailures: a record is acknowledged when the ledger holds its
// outcome or another owner is responsible for it, and reported when it
// must come back (retry_wait, not due, contention, deadline, an AWS error).
//
// # Fault injection
//
// [Hooks] are called at step boundaries. A hook returning an error
// simulates the worker dying there: the record stops at once with an item
// failure and no further writes (the lease is left to expire), which is how
// tests and the soak test exercise crash recovery.
//
// # Logs and metrics
//
// Logs carry ids, versions, classes, hashes and sizes; never task input,
// results or credentials. Each batch writes one EMF record of outcome
// counts (outcomes) and item failures, and each provider call one record
// of its latency.
package worker
