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
//   - Cost per task, for a 100 B, 8 KB and 30 KB prompt, a 1 MB
//     document and a 100 KB result, tasks run one at a time through the
//     real path on the emulator (RunCost): AWS calls by operation;
//     DynamoDB write and read request units computed from item sizes by
//     DynamoDB's rules (package itemsize; an UpdateItem bills the larger of
//     the item before and after, read through an uncounted probe client;
//     a write also bills its global secondary index updates, from the
//     table's indexes and the item before and after: indexWriteUnits),
//     cross-checked against the ConsumedCapacity the emulator returns
//     (kumo returns none; moto returns a per-call figure not sized by
//     DynamoDB's rules); SQS requests in 64 KB chunks; S3 requests by
//     price tier; Lambda requests and GB-seconds (the template's memory for
//     the modelled AWS call time); USD per million tasks at the us-east-1
//     prices of prices.go (each cited with its page and the date read).
//     Side by side: a baseline SQS→Lambda consumer with a Powertools-style
//     idempotency record (baseline.go, run on the same emulator), and Step
//     Functions Standard running stepfunctions.asl.json (generate → wait
//     for approval → deliver), its transitions counted by walking the ASL
//     (WalkASL) and priced with the calls it implies. taskledger runs
//     before the claim-check (no payload store: everything inline; a 1 MB
//     document is n/a) and after it (each function's payload.Store on its
//     counted clients). The 1 MB document goes the way a client sends one:
//     POST /uploads through the submit handler, a PUT to the presigned URL
//     over HTTP (counted by the bench as one S3 PUT request: it is no SDK
//     call; the presigning itself sends nothing and the meter takes it out
//     of the counts), the submit naming the upload (Resolve, Adopt), the
//     worker's read; the run fails unless every task's reply names its
//     document's SHA-256 and size. The baseline and Step Functions carry a
//     document over their message/state limits (SQS 1 MiB, Step
//     Functions 256 KB) through S3. The
//     floor of DESIGN §1 (floorCost, derived): the least any submit → SQS
//     → worker design must bill to keep the promise, each forced call at
//     its cheapest; a baseline below it makes "below the baseline"
//     unreachable, and the table says so on that line.
//   - A latency line (RunLatency): submit → completed minus the provider's
//     time, with per-call AWS latencies injected (faultinject.Latency,
//     DynamoDB 5 ms, SQS 10 ms, S3 15 ms), against the critical-path floor
//     (PutItem + SendMessage + ReceiveMessage + claim + complete).
//
// Numbers from an emulator on a shared machine are noisy; ratios measured in
// one run are the point.
package bench
