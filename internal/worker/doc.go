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
//  2. claims the task with one conditional UpdateItem returning ALL_NEW (the
//     input comes back with it: no read on the happy path; a generate claim
//     refused by an expired lease is followed by a takeover, ledger.TakeOver).
//     Refused, the ledger says why: a terminal, parked, unknown or leased
//     task is acknowledged without a provider call (the reconciler
//     guarantees progress); a retry not due yet goes back to the queue with
//     its visibility set to the remaining delay; a task past its budgets is
//     parked (budget_exhausted) — unless its last attempt's lease expired,
//     or an earlier attempt's outcome is open: acknowledged and left to the
//     reconciler's readback, as that attempt may have reached the provider.
//     A claim whose reply was lost is recognised by the ledger (write_nonce)
//     as this worker's claim, never as "leased" by someone else;
//  3. calls the provider with the task id as operation id (its idempotency
//     key), once the input and documents are read (Payloads in S3), the
//     call admitted (Provider admission), its spend reserved (Spend) and,
//     where needed, its start marked (The call-start mark). A heartbeat,
//     every Lease/3, renews the lease (fenced on the assignment version;
//     ledger.Renew) and extends the message's visibility to 2×Lease. A
//     fenced renewal means another worker owns the task (or it is
//     settled): the call's context is cancelled at once (cause
//     [ErrFenced]) and nothing is saved — unless the task is unknown, or
//     parked unknown_outcome, at this worker's own version (the reconciler
//     expired a lease whose renewals did not get through): renewals stop,
//     the call goes on, and its result can still settle the task. A cancel
//     of the running task (POST /tasks/{id}/cancel, ledger.CancelRunning)
//     bumps the assignment version, so it is met like a takeover (see
//     Settling after the lease is lost);
//  4. completes the task conditioned on the assignment version (state
//     running, or unknown at the same version when the reconciler expired a
//     slow worker's lease). A rejected completion is never retried: the
//     worker logs which case the ledger read (already_completed,
//     taken_over, not_running, gone), or settles the result when the
//     reconciler or a cancel got there first (see Settling after the lease
//     is lost); a completion whose reply was lost is recognised as saved. A
//     result that would push the item over DynamoDB's 400 KB limit
//     (ledger.CheckCompletion) is not sent: the task is parked
//     result_too_large with the provider reference and the sizes; one
//     DynamoDB refuses as invalid is parked result_not_saved;
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
// recorded before the call (ledger.MarkCallStarted, repeated like a
// settling write). Without it the reconciler could not tell a worker that
// died after its claim from one that died mid-call, or one whose call
// still runs while its renewals fail. A fenced mark is acknowledged; one
// that keeps failing releases the task and its attempt; either way nothing
// is called. The reconciler trusts a readback's "not found" once the lease
// end plus the call timeout has passed, so every call — marked, or unmarked
// to a step that deduplicates, after a claim that took long to reach the
// call — starts only inside its lease (leaseForCall): with under a
// heartbeat of it (the mark's, or the claim's) left, the lease is renewed
// first, and a refused renewal, or one answered too late, means no call. A
// task given back without a call after the mark is given back from where
// the reconciler put it (see Settling after the lease is lost).
//
// # Spend
//
// A task with a spend budget (spend.go) reserves the call's maximum
// (callMaximum: prompt bytes, each document's bound, output; the input as
// read for the call) on its regenerate chain's budget item and its own
// before the call — a budget that cannot cover it parks the task
// budget_exhausted with no call made. With a daily quota configured, every
// generate call (budgeted or not) reserves the same maximum on its
// caller's day item. Both are settled after the call with the provider's
// reported usage; a call sent and failed with anything but a definite
// refusal (a 5xx included) is charged the full reservation, a call never
// sent nothing. A quota without room makes no call: when only the
// reservations of calls in flight keep it out, the task waits for them
// like an admission wait (quotaWaitFor; bounded by its age budget); when
// the settled usage leaves no room, or the call is larger than the whole
// quota, it is parked budget_exhausted (error class quota_exceeded; the
// review says the next UTC day, or never). A caller's burst overruns the
// quota by at most what its calls in flight use beyond their
// reservations. A crashed attempt's reservation is settled in full by the
// task's next attempt, or — when there is none — by the reconciler's park
// or cancel, or an operator's action on the parked task; one whose write
// failed is given back. A provider reporting more tokens than the call's
// bound is logged and counted (MetricBoundExceeded).
//
// # Uncertain outcomes and effect classes
//
// "Unknown is not failed" (DESIGN §1.4). An uncertain attempt is scheduled
// for a retry like a transient one only when repeating the call is safe:
// the provider honours the operation id as an idempotency key
// (provider.IdempotencyHonouring: the next attempt returns its recorded
// result), or Handler.RetrySafeGeneration declares generation retry-safe
// (DESIGN §14, docs/protocol.md: a repeat costs only money, every call is
// charged); the first keeps the outcome open until a later attempt collects
// it (ledger.ScheduleRetryUncertain: a budget park reads it back or says
// the provider may have acted). Otherwise, or with no attempt left, the
// task goes to unknown and the reconciler resolves it by readback. The same
// rule decides the takeover of a running task whose lease expired
// (AllowTakeover). A retry-safe generation's budget park is worded for the
// policy (review.BudgetExhaustedAfterClass), and a cancel that cuts its
// call ends it cancelled at once (settle's knowCharged), its reservation
// charged; its calls are still marked (needsCallMark) for a reconciler that
// treats generation as an effect while a deployment changes the class. The
// zero value treats generation as an effect; the functions and make run
// default to retry-safe (GENERATION_EFFECT_CLASS). Deliveries are always
// effects.
//
// # Settling after the lease is lost
//
// A worker whose lease was lost — the reconciler expired it, or a cancel
// while running fenced it — may still settle what it knows (DESIGN §14),
// through one pure decision: settle (settle.go) takes the task as the
// refused write returned it, the worker's assignment version v and what
// it knows, and names the one ledger transition to send:
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
// Queued at v with its attempt still counted and no readback's "not
// found" since (ledger.RequeuedAt: the reconciler re-queued the lapsed
// lease, since a provider that deduplicates is called unmarked, or no
// mark was found), a worker that
// made no call sends ReleaseRequeued: the attempt is given back and what
// the lapse recorded — the outcome it left open, its history entry, its
// unknown_outcome error — is void, an earlier attempt's kept; so no later
// review claims a call that never started. Whatever else it knows sends
// nothing from there.
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
// open review as the worker. A ReleaseRequeued refused because the spent
// budget's readback moved the task to unknown is followed by
// ReleaseUnknown, and a ReleaseUnknown refused because the park came first
// by ReleaseLapsed; a CompleteLapsed that cannot save the
// result revises the review to result_too_large or result_not_saved
// (ledger.ReviseLapsed, or the review item alone when that keeps failing).
//
// # Payloads in S3 (Handler.Payloads)
//
// With a claim-check store (DESIGN §12; payloads.go), an input in S3
// (input_ref) is read and verified (size, SHA-256) after the claim: S3
// unavailable gives the claim and its attempt back (the message returns
// after a backoff); an object gone or holding other bytes fails the task
// input_unavailable — the provider never sees other bytes than the
// submitted ones. A task's documents (documents.go) are read and verified
// the same way (document_unavailable). An instance holds at most
// DocumentMemory bytes of documents at once (docmemory.go): a record whose
// documents do not fit is given back and returns after
// DocumentMemoryRetry. A result above the inline threshold is put at
// results/<task>/<created_ms>/<assignment_version> (a re-created task has
// a new created_ms) before the fenced completion, which saves only the
// reference: a worker fenced out later leaves an orphan under its own
// version. The put is repeated like a settling write; if S3 stays down, a
// result that fits the item is saved inline, else the task is parked
// result_not_saved. Without a store no S3 call is made.
//
// # Deliver tasks
//
// A deliver task (DESIGN §10) runs through the same steps; only the call
// differs (deliver.go): the destination its input names, bound by package
// deliver with its guarantees for this delivery, performs it and its
// receipt becomes the result. So the re-send of an uncertain attempt and
// the call-start mark follow the destination, not the provider, and a
// deliver task is never taken over (ledger.ClaimOptions.TakeoverKind). A
// task whose destination is not configured is parked, one whose input is
// invalid fails.
//
// # Failed settling writes
//
// What the worker learned from the provider lives only in its memory until
// the write that settles the attempt succeeds; deferring the message would
// not help, since the redelivery meets the worker's own live lease and is
// acknowledged. So a settling write that is throttled or fails ambiguously
// is repeated in process (saveRepeats, save.go; never into the last second
// of the invocation) with the same write nonce, so a send applied late is
// recognised, and under a heartbeat that keeps the lease. When the repeats
// run out, a result is parked result_not_saved with the provider
// reference; every other settling write (ScheduleRetry, MarkUnknown, Fail)
// defers the message and leaves the task to its lease: a Release there
// would give back an attempt the provider was called for and drop the
// retry's not_before. A claim whose reply was lost and could not be
// confirmed is given back with ledger.ReleaseClaim, conditioned on this
// record's lease owner.
//
// # Deadlines
//
// Never start a provider call that cannot finish. Every call is bounded by
// its call timeout (Handler.CallTimeout) on the call's context, and work
// stops DeadlineMargin before the Lambda deadline. A record is admitted
// only when work has at least the call timeout left: checked before the
// claim (a record turned away is not claimed, consumes no attempt, is made
// visible again at once and reported as a failure: outcome not_admitted),
// again after it, and once more just before the call, after the writes
// between (the call-start mark, a renewal) which a slow DynamoDB can
// stretch to seconds (if they ate the time, the task and its attempt are
// released and the message made visible again). A call that
// runs past its call timeout is an uncertain attempt, never a failed one.
// Records run concurrently, at most Concurrency at a time; with
// Concurrency at least the batch size (docs/timing.md) every admitted
// record starts at once, so a full batch fits the function's Timeout.
//
// # Provider admission
//
// With Handler.Admission set (PROVIDER_ADMISSION, admission.go), every
// provider call is admitted against the model's shared per-minute limits
// (internal/admission) after the claim and before the call-start mark.
// When the last 60 s leave no room, the task goes back to retry_wait until
// the earliest slot at which the call fits (ledger.WaitAdmission: the
// attempt is given back) and the message is hidden until then, so waiting
// consumes no attempt and is not hot-looped; the record counts as
// not_admitted. An admission whose call is not made is given back, and a
// call that could not start within its admit's slot is admitted again. A
// call admission can never admit (no limits for the model, an estimate
// over the per-minute token limit) is parked provider_config without a
// call. After a successful call the window is corrected by the provider's
// reported usage; the estimate is the bound the budget reserves.
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
