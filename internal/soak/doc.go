// Package soak proves taskledger's promise (DESIGN.md §1) under faults: it
// pushes N tasks through the real submit, worker and reconciler handlers,
// behind the emulated event sources of package local (the SQS event source
// mapping's Poller and the schedule's Ticker), with the simulated provider,
// on an emulator — and injects faults on a seeded schedule. When the run has
// drained, a checker reads the tables and the provider's ledger and reports
// every broken invariant.
//
// # Faults
//
// Each task gets at most one planned fault kind (a seeded shuffle of
// Config.FaultShare × N tasks over the kinds, round-robin, so every kind is
// planned for ⌊share×N/kinds⌋ tasks or one more):
//
//   - the worker dies at a step boundary (worker.Hooks: before the claim,
//     after it, after the provider answered, after the save), once;
//   - the same SQS record is delivered twice, at once (same message id and
//     receipt handle, two invocations) or again after it was handled;
//   - duplicate submits (same key and payload, after the 202), three
//     concurrent submits with one key, and the same key with another payload
//     (after the first, or racing it);
//   - provider faults, scripted per operation on the simulated provider:
//     accept-then-lose-reply, 429 with Retry-After, 5xx, permanent 4xx,
//     credentials, a call slower than the lease, 5xx until the attempt
//     budget is gone;
//   - a stale worker: it pauses after the provider answered until another
//     worker took the task over, then tries to save;
//   - AWS faults as SDK middleware around the real clients (package
//     faultinject): DynamoDB throttling of the submit's put, the claim or the
//     next update; the put performed but its reply lost (503, retried with
//     the same key); the outbox SendMessage failing, or performed with its
//     reply lost;
//   - a cancel racing the worker.
//
// Run-wide: on a seeded share of the schedule's ticks two reconcilers run at
// once; poison messages go to the task queue and to its dead-letter queue;
// seeded-rate background faults (Config.Background) hit any handler call.
//
// Time is compressed, not faked: leases of seconds, a queue visibility
// timeout of seconds, retry backoff of milliseconds, an age budget of a
// minute and a reconciler period of a second, all on the wall clock the
// emulator's visibility timeouts also use.
//
// # Checker
//
// After every accepted task is final (or the drain timeout passed) and the
// event sources stopped, the tables are scanned and checked: every accepted
// task is in one of completed, failed, cancelled, needs_review, within its
// age budget plus one reconciler period (and the reconciler's run budget);
// at most one saved result per task (saves are counted at the SDK
// middleware); a completed task's result is the provider's recorded one and
// came from exactly one side effect; side effects ≤ 1 per task (the provider
// honours idempotency keys); attempts ≤ max_attempts; every needs_review
// task has its open review item and every review item a task (or a poison
// message the run sent); submits: no status outside 200/202/422/503, at
// most one 202 per key, 422 only for another payload, the stored input is
// the accepted payload, a 503 for a put that happened is followed by a 200
// replay, and no caller is left with a 5xx for a task that exists; a
// cancel answered 200 ends cancelled and one answered 409 does not.
//
// [Report.WriteTable] prints fault kind × planned tasks × injected × final
// states × violations.
package soak
