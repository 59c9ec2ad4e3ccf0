// Package faultinject injects AWS faults around the REAL DynamoDB and SQS
// clients, as SDK middleware, on a seeded schedule. Nothing is mocked: a call
// that is not faulted goes to the emulator (or AWS) unchanged, and a call that
// is faulted either never leaves the process or really reaches the server
// before its reply is dropped.
//
// # Model
//
// An [Injector] is registered on a client's middleware stack
// (aws.Config.APIOptions or awsclient.Options.APIOptions; see
// [Injector.Register]). For every call it builds a [Call] — service,
// operation, the task the call is about (read from the typed input: the
// task_id key of a DynamoDB item, the task reference in an SQS message body)
// and N, how many calls of that service, operation and task came before
// plus one — and asks its [Schedule] which [Kind] of fault applies:
//
//   - [Throttle]: the call fails before it is sent with an AWS throttling
//     error (DynamoDB ThrottlingException, SQS RequestThrottled). Nothing is
//     written. It is injected outside the SDK's retry loop, so it models a
//     call that was still throttled after the SDK's bounded retries.
//   - [SendFailure]: the call fails before it is sent with a server error
//     (ServiceUnavailable, HTTP 503). Nothing is written.
//   - [LostReply]: the call is sent and the server performs it (the item is
//     put, the message is enqueued), then the reply is lost: the caller gets a
//     [*LostReplyError], which wraps context.DeadlineExceeded as a client
//     whose deadline passed while waiting would.
//
// The injected errors satisfy smithy.APIError (the two rejections) or
// net.Error-like Timeout() (the lost reply), so callers classify them exactly
// as they classify the real thing (ledger.IsThrottle, for instance).
//
// # Item size
//
// DynamoDB refuses a write whose item would exceed 400 KB with a
// ValidationException and applies nothing; kumo does not enforce the limit
// and moto applies the write before it errors. [EnforceItemSize] (also
// applied by every [Injector]) refuses such writes before they are sent,
// with DynamoDB's error, sizing items by package itemsize; for updates the
// key plus the SET values is a sound lower bound (see [EnforceItemSize]).
// internal/testenv registers it on every test client.
//
// # Placeholders
//
// kumo resolves expression attribute name placeholders by textual
// replacement, so "#s" inside "#sr" can turn a condition on one attribute
// into a condition on another. [RefuseAmbiguousNames] (also applied by
// every [Injector]) refuses such a request before it is sent, unless the
// textual result is what DynamoDB would read; internal/testenv registers
// it on every test client.
//
// # A lost reply the SDK retries
//
// A [Replayer], registered before the Injector, models the other face of a
// lost reply: the server performs the call, the reply is lost, the SDK sends
// the same request again, and the caller sees only the second answer — for
// a conditional write, its condition failing on the first send's own write.
// Replayer.Decide picks the calls from their typed input (the soak picks a
// task's claim, completion or schedule-retry UpdateItem by the state it
// sets). Both sends pass the Injector, so its OnResult sees both.
//
// # Schedules
//
// [Plan] scripts faults per task ("the first PutItem of task t_x is
// throttled"); [Rates] draws faults with per-rule probabilities from a hash
// of (seed, service, operation, task, N), so a run is reproducible whatever
// the goroutine interleaving; [Chain] consults several in order. A schedule
// sees every call; return "" for no fault.
//
// # Latency
//
// [Latency] adds a fixed per-service delay to every call after the server
// answered ([DefaultLatency]: DynamoDB 5 ms, SQS 10 ms, S3 15 ms;
// [ParseLatency] reads "DynamoDB=5ms,SQS=10ms"), so a run on an in-process
// emulator shows what the same calls cost in time against real endpoints
// (the bench's latency line).
//
// # Observation
//
// [Injector.Injected] counts the faults injected, by kind and operation;
// Injector.OnInject is told about each one (to attribute it to a task), and
// Injector.OnResult about every call that reached the server (the soak
// checker counts saved results this way). [Injector.SetEnabled] turns
// injection off, for a drain phase.
package faultinject
