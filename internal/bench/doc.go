// Package bench measures taskledger against DESIGN.md §9 on an emulator, in
// one run, and prints a table. It reports; it never asserts a timing.
//
//   - AWS calls per task on the happy path, by component and operation,
//     counted by SDK middleware (awsclient.Counter) on each component's own
//     clients: the submit function, the worker function, and the event source
//     mapping (receive and delete, amortised by batches). Each is compared with
//     the §9 budget (submit: 1 PutItem + 1 SendMessage; worker: 1 claim
//     UpdateItem + 1 complete UpdateItem, heartbeats only for calls longer than
//     lease/3); any other call, or more than the budget, is flagged EXCESS.
//   - End-to-end throughput of the full pipeline (in-process submit →
//     SQS → the poller → worker → ledger) against a bare SQS pipeline (send →
//     the same poller → a handler that only calls the provider → delete) on
//     the same emulator in the same run, and their ratio.
//   - Submit latency p50/p99, in process, one caller at a time.
//   - The three bootstrap binaries built as deployed (linux/arm64,
//     -tags lambda.norpc, -trimpath, -ldflags '-s -w'): their sizes, and the
//     init time of a host build of each (process start to its first poll of a
//     local Lambda Runtime API stand-in).
//   - Reconciler read cost with 10 and with 10,000 completed tasks in the
//     table: DynamoDB read calls and items read by one run, counted by SDK
//     middleware. The sparse by_state index keeps completed tasks out of it.
//
// Numbers from an emulator on a shared machine are noisy; ratios measured in
// one run are the point.
package bench
