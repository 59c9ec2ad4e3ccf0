// Package reconciler is the scheduled handler that keeps every accepted task
// moving toward exactly one end state (DESIGN.md §7). EventBridge Scheduler
// invokes it every minute; each run is bounded and the next run resumes
// where it stopped.
//
// # Model
//
// The reconciler reads only the sparse by_state index (live tasks; terminal
// and parked tasks are not in it), one shard of one state at a time, in
// due_at order with DueBefore = now (less a grace per state). It never
// keeps a cursor between runs: whatever it did not reach is still due and
// is found again next run. The walk is round-robin over all (state, shard)
// streams, one page each, starting at a rotating shard, so one hot shard or
// one crowded state cannot starve the others within the time budget. The
// budget holds within a page too, so the metrics are always reached: a due
// task not started when the work budget ends is left for the next run, and
// a provider Lookup still running then is cut and counts as no answer (a
// readback error; the task stays unknown). A readback that gave no answer,
// cut or failed, moves its task behind the others of its stream
// (ledger.DeferReadback: due_at = the run's start, due again Settle after it), so
// readbacks that hang cannot spend every run's budget before the tasks
// behind them are started.
//
// For each due task it makes one consistent read of the task and applies the
// rule of the task's current state — except a queued or retry_wait task
// within its budgets, relayed straight from its index entry (ClaimDispatch
// is conditioned on what the entry carries; a refusal returns the item):
//
//   - running, lease_until more than Grace in the past: with budget left and
//     a step that cannot cause a second side effect (SideEffects(kind) is
//     false: by default, the provider honours idempotency keys) → Requeue and
//     send its message. With a provider that does not honour idempotency
//     keys, a lease without the worker's call-start
//     mark at its version (call_started_version) had no provider call
//     started under it: with budget left → RequeueUnstarted and send, else
//     park budget_exhausted saying no call was started. A step with side
//     effects, or a provider that can be read back → unknown (ledger.ExpireToUnknown), resolved by readback on a
//     later run — or in the same run, without the Settle wait, when the task
//     is past its age deadline. Otherwise, no budget → park budget_exhausted.
//     This is also the path of an expired lease on the last attempt: the
//     worker acknowledges such a duplicate message and leaves it here, so a
//     provider that may have acted is read back before anything is parked.
//   - unknown, for at least Settle (not waited for past the age deadline):
//     provider Lookup. Found →
//     CompleteFromReadback (readback_at; with Handler.Payloads a result
//     above the inline threshold is first put in S3 at
//     results/<task>/<created_ms>/<assignment_version> and the reference
//     saved); a result too large for the item
//     (ledger.CheckCompletion, ledger.ItemTooLargeError) → park
//     result_too_large; a save refused as invalid, or failing on every run
//     until the age budget ends → park result_not_saved with the readback
//     facts. contract.ErrNotFound (credibly never happened) → Requeue and
//     send, or park budget_exhausted when no budget is left. While a
//     lapsed call of an earlier attempt of a provider that deduplicates
//     may still run (its lease's end plus the call timeout), "not found"
//     is no such proof: with budget left → RequeueCallMayRun and send (the
//     next call collects what that call generates; the outcome stays
//     open), else the task waits for it, and is parked saying so past its
//     age budget. So is an idempotent destination's "not found" without
//     deliver.ErrAbsent: with budget left → RequeueCallMayRun and send.
//     contract.ErrNoReadback, or no Looker → park unknown_outcome (a
//     retry-safe step instead: ledger.RequeueRetrySafe while budgets last).
//     A failed lookup is deferred (DeferReadback) and retried after Settle,
//     and parked once the task is past its age budget. A task cancelled while running (Task.CancelledWhileRunning:
//     cancel_version is the version before its own — an operator's retry
//     of the cancel's park and a new claim leave an attempt no cancel
//     fenced; ledger.CancelRunning; due when the fenced lease would have ended) is
//     resolved the same way, except that "the provider did not act" ends it
//     cancelled (ledger.CancelUnknown) instead of re-queuing it: no
//     call-start mark at the cancelled version (a provider whose calls are
//     marked), or a readback that finds nothing (cancel.go) — for a call
//     marked at the cancelled version only once the fenced lease's end
//     plus the call timeout has passed: the fenced worker may not have
//     learnt of the cancel, and its call runs on as after an expired
//     lease (callMayRun; until then it waits, past the age budget it is
//     parked).
//   - a deliver task (DESIGN §10) follows the same rules with its
//     destination in the provider's place (deliver.go, package deliver):
//     side effects unless the destination is idempotent, readback through
//     the destination and destination.Decide — a lagging "not found"
//     (deliver.ErrNotYetVisible) is read again every run, and parks,
//     saying so, when the age budget ends; its unknown_outcome review
//     speaks of the delivery (review.DeliveryUnknownOutcome).
//   - queued / retry_wait past due_at (retry_wait: plus RelaySlack, since
//     the worker's delayed message normally arrives on its own) → the outbox
//     relay: ledger.ClaimDispatch, and only its winner sends the message.
//     Each re-send doubles the wait for the next (DispatchTimeout × 2^n,
//     capped, and never past the task's age deadline), so a queue backlog
//     older than DispatchTimeout costs a few duplicate messages per task,
//     not one every DispatchTimeout.
//   - awaiting_approval past due_at (its approval deadline; the age
//     budget does not apply: the generation is done) → park
//     approval_expired (ledger.ExpireApproval, review.ApprovalExpired); an
//     approval or rejection that wins the race makes the park's condition
//     fail and is counted as raced.
//   - any other live state past its age or attempt budget → park budget_exhausted
//     (running only once its lease expired, and only when no readback can
//     say more). A queued or retry_wait task whose earlier attempt's outcome
//     is open (Task.OpenUncertainty), with a readback and a step that is
//     not retry-safe, goes to unknown instead (ledger.AwaitReadback), for
//     the readback to decide.
//
// After every park (and every cancel of a task cancelled while running),
// Handler.Spend settles what the run's attempts still hold on the task's
// budgets and its caller's daily quota (spend.Accountant.SettleAbandoned):
// a crashed attempt's reservation, which only the task's next attempt
// settled, is charged in full (at nothing when the call-start mark, or the
// cancel, proves no call acted), instead of holding the caller's day as a
// call in flight until the day ends. Best effort and after the write: a
// failure is logged and leaves it counted.
//
// Every branch ends within the age budget plus one run: a branch that can
// fail on every run (a lookup, a readback save) parks once the task is past
// its deadline; the others either act at once or hand the task to a state
// whose rule checks the budget (queued and retry_wait here, and the claim).
//
// Handler.HandleTask applies the same rules to one named task at once
// (one read, the rule of its state, which checks that the task is due),
// without the walk, the dead-letter drain or metrics: for a caller that
// knows which task is due and cannot wait for a run to reach its stream.
//
// Then it drains the task dead-letter queue (bounded): a body that is not a
// task reference becomes a poison_message review item and is deleted only
// after the item is written; a task reference is deleted (the task's own
// due_at brings it back to the rules above if it is still live).
//
// Finally it emits CloudWatch EMF metrics: live tasks and the age of the
// oldest task per live state, open review items (in all and per reason,
// dimension Reason), re-sent dispatches,
// readback outcomes, parked and re-queued tasks.
//
// # Concurrency
//
// Two runs at once are safe: every write is conditioned on the state and
// version the run read (Requeue, ExpireToUnknown, CompleteFromReadback and
// Park are fenced; Park is one transaction with the review item), and the
// relay sends only after winning ClaimDispatch. The loser of any race sees a
// *ledger.FencedError, a *ledger.ConflictError (ledger.IsAlreadyParked) or
// ok=false and counts it in Summary.Raced: no double park, no double send,
// no lost task.
//
// # Cost
//
// Reads grow with live work, never with history: per run, one Query per
// (state, shard) stream page for the rules and one per stream for metrics
// (tasklist.QueryLive, and tasklist.CountLive past a page), one GetItem
// per due task (none for a queued or retry_wait task within its budgets),
// and a few Queries of the open_reviews index (tasklist.ListOpenReviews).
//
// # Age approximation
//
// The index is ordered by due_at, not by age. The oldest-task metric of a
// state is the largest age (now - budget_start_ms) among the first page
// (PageLimit tasks, earliest due first) of each of its shards; it is exact
// whenever a shard holds at most PageLimit tasks of that state.
package reconciler
