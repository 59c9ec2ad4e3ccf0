// Package modeltest is a model-based test of taskledger's promise
// (DESIGN.md §1): a rapid state machine (pgregory.net/rapid) drives the
// real handlers through interleavings no hand-written test lists, and
// checks the promise after every step.
//
// # The system under test
//
// Each run (one rapid test case) creates fresh tables on the backend
// (kumo, and moto with fewer runs; testenv.Backends) and wires, as
// deployed: the submit handler (api.Handler: submit, cancel, approve,
// withdraw), the worker (worker.Handler.Handle on one SQS record at a
// time), the reconciler (reconciler.Handler.Handle, the scheduled walk of
// the by_state index) and the operator's action (opsapi.Apply: retry,
// resolve completed or failed). The provider is the simulated one, the
// deliveries go to the simulated notify destination, both in one mode per
// run: plain (neither idempotency nor readback), plain+readback, or
// idempotent; in the plain modes generation may be declared retry-safe
// (reconciler.Handler.RetrySafeGeneration, DESIGN §14), deliveries never
// are. Time is a settable clock (testenv.Clock) that only the model moves;
// the lease is five minutes of it and a call may run two leases. The task
// queue is the model's: submit, the outbox relay and operator retries send
// to it, and the model decides which message a worker gets and whether it
// comes again (SQS delivers at least once, in any order). DynamoDB is the
// emulator, with no mock in between.
//
// # Steps
//
//   - submit: a new task, one behind an approval gate with a delivery, the
//     same key and payload again (200, the same task), or a new task whose
//     outbox send fails (the relay must send it);
//   - deliver: a worker handles one message to its end, possibly dying
//     after its claim, after the provider answered or after its save (before
//     the acknowledgement); the provider's answer is drawn (a result, a
//     reply lost after it acted, 5xx, 429, 400), and so is a lost reply on
//     one of the worker's own writes (claim, call-start mark, completion,
//     scheduled retry): applied, then either a timeout or the SDK's retry
//     meeting the applied write; the message may be delivered again later
//     whatever the worker answered;
//   - pause / resume: a worker stops until a later step lets it go on —
//     after its claim, in its call before or after the provider acted, with
//     the reply in hand before its save, or with one of its writes in
//     flight (held before it is sent, so it lands after the clock moved on,
//     or applied with its answer held): writes slower than a lease. A call
//     held past its call timeout ends uncertain without acting, as the
//     worker's timeout would end it;
//   - heartbeat: the paused worker's lease renewal while its call runs
//     (ledger.Renew with the same fence as the worker's heartbeat);
//   - advance: the clock moves by a grace, a settle, a lease, a call timeout
//     or twenty minutes;
//   - reconcile: one reconciler run, one in four with every provider and
//     destination readback failing (an outage: no answer);
//   - cancel, approve (the result shown), withdraw: through the HTTP
//     handler, as a caller and an approver do;
//   - operator: retry, or resolve completed or failed, a parked task.
//
// A run ends with a drain: the paused worker finishes, then rounds of
// every queued message handled, twenty minutes and a reconciler run, until
// every task is final.
//
// # What is checked after every step
//
//   - at most one saved result per task: successful writes that set a
//     result (worker and reconciler, counted at the SDK middleware), per
//     run of the task (an operator's retry starts a new one);
//   - an effect with neither idempotency nor readback is started at most
//     once: at most one call acted, and no call started after an earlier
//     call whose outcome its caller could not know (anything but a refusal
//     in so many words), unless a readback found nothing in between; for
//     generation in the plain modes unless it is declared retry-safe, for
//     deliveries always;
//   - retries are bounded: at most one call per attempt;
//   - nothing lost: every accepted task exists and is live with a due time
//     in the index or a message in the queue (or held by the paused
//     worker), or final; a parked task has its open review item, with the
//     same reason; after the drain, every task is final;
//   - nothing final without a reason: completed with a result (and, behind
//     a gate, approved, unless an operator resolved it), failed with an
//     error class, cancelled only after a cancel or a withdrawal asked for
//     it, never rejected (no step rejects);
//   - no false uncertainty: a review that is unknown_outcome, or says the
//     provider may have acted, has a call or a call-start mark (the
//     worker's word, written right before its call) behind it — unless the provider
//     deduplicates (its calls are never marked, so only its readback can
//     say none was made) and the task's last readback failed, or found
//     nothing before the fenced lease's end plus the call timeout (a
//     worker whose renewals fail may still be in its call): that
//     uncertainty is real;
//   - no false certainty: a review that says nothing was generated has no
//     call of its run behind it that acted;
//   - no silent uncertainty: a budget_exhausted review of a run in which a
//     call acted says the provider may have acted (a retry-safe
//     generation's says instead that its calls are not marked).
//
// A worker dying between its call-start mark and its call is not a step:
// the mark is the worker's word that a call may have started, and an
// uncertainty it leaves is real. Neither spend, admission nor the S3
// claim-check is configured; their soak and unit tests cover them.
//
// # Runs
//
// The kumo leg makes 40 runs and the moto leg 4, of 30 steps on average
// (rapid's default); -rapid.checks and -rapid.steps (or RAPID_CHECKS,
// RAPID_STEPS) go further. A failure prints the shrunk steps, one line each.
//
// # What this test has caught
//
// Each defect below was put back (its fix reverted in a scratch clone) and
// the test run on kumo with -rapid.checks=200..300; the shrunk
// counterexample in one line:
//
//   - the reconciler treated an expired lease without the worker's
//     call-start mark like a marked one (49b8a3b): a delivery's worker dies
//     after its claim, the reconciler moves the lease to unknown and parks it
//     unknown_outcome saying the destination may have acted — no call
//     started (false uncertainty; found after 70 runs);
//   - the worker wrote no call-start mark before calling a provider without
//     idempotency (7d103d3): a delivery's worker calls, dies after the
//     destination acted, the reconciler re-queues the unmarked lease and the
//     next worker delivers again — two side effects (after 11 runs);
//   - a worker that made no call after its mark left the task where the
//     reconciler put it (b458a38): a delivery's call-start mark is answered
//     late, the clock moves 20 minutes, the reconciler expires the marked
//     lease to unknown, the worker resumes, finds its lease gone and makes no
//     call, and the reconciler parks unknown_outcome — no call started
//     (after 277 runs);
//   - a readback completion ignored the task's approval gate (d8fc402): a
//     gated task's worker dies after the (idempotent) provider answered, a
//     cancel lands while it is running, and after 20 minutes the reconciler
//     reads the result back and completes the task without its approval
//     (after 19 runs);
//   - a deduplicating provider's attempt whose reply was lost was retried
//     as a plain retry, its uncertainty forgotten: the call generates and
//     its reply is lost, the worker retries under the same key, two 503s
//     use up the attempts, and the worker's budget park says nothing of
//     the first call (silent uncertainty; found by the rule's first run,
//     after 1,403 runs, with no fix reverted);
//   - a deduplicating provider's call, never marked, could start after its
//     lease had ended: a worker stops after its claim, the reconciler
//     expires the lease and, past the lease's end plus the call timeout,
//     reads back "not found" and parks saying nothing was generated; the
//     worker resumes, calls, and the provider generates (false certainty;
//     found once in 1,500 runs and not replayed, then after 81 runs of
//     the idempotent mode with 50 steps).
//
// Not caught in 300 runs: a readback "not found" trusted while the lapsed
// call may still run (the fix of 722b906), and a marked call started after
// its lease ended (bed7a43, 6350c36); each needs a call held across a lease
// expiry and two reconciler runs in one order, deeper than the runs reach.
// Nor in 3,000 runs, with steps added for it (a gateway's 504 whose
// Retry-After passes the age deadline, a lease that lapses in its call, a
// backlog past the deadline): a deduplicating provider's lapsed call whose
// open outcome a readback's re-queue settled while the call could still
// generate (row requeue_readback_absent_call_may_run). rapid draws the
// state machine's actions by name, earlier names more often, and an
// action that cannot apply is drawn again: advance and cancel take most
// steps (about 11 and 4 a run, against 1.3 provider calls), and half the
// runs end with a cancelled task, so chains of five ordered steps on one
// task are rare. Weighing the actions in one dispatcher would reach them,
// and would move every "after N runs" above.
package modeltest
