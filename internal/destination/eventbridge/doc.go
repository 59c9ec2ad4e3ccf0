// Package eventbridge is the "eventbridge" destination, the AWS-native one:
// one Amazon EventBridge PutEvents entry per delivery, on a bus named in
// configuration (Options.BusARN; requests never name a bus).
//
// The entry's source is Options.Source ("taskledger"), its detail-type
// Options.DetailType ("taskledger.delivery") — configuration only: params
// naming a "detail_type" are refused, so a caller cannot make a direct
// delivery match the rules that route approved ones — and its detail
// {"operation_id","payload_sha256","correlation_id","provenance",
// "payload"}, so a rule can route on the operation and on
// provenance.type ("approval" or "direct"; destination.Provenance), and a
// consumer can deduplicate by operation_id. The receipt names the bus ARN
// as the destination identity and the event id as provider_ref.
//
// # Guarantees
//
// None: PutEvents takes no idempotency key (each call is a new event with
// a new id) and EventBridge keeps nothing a producer can read back. So the
// SDK's own retries are switched off for the call — the SDK would
// otherwise re-send after a lost reply — and an uncertain outcome parks the
// task unknown_outcome (destination.Decide) for a person, whose review can
// check the consumers.
//
// # Outcomes
//
// FailedEntryCount is read per entry: ThrottlingException is transient,
// InternalFailure retryable, authorisation, not-found and KMS codes are
// misconfiguration, anything else (MalformedDetail, InvalidArgument) the
// request's fault. An error response from the service is a refusal only
// when it says so — a throttle is transient, an authorisation, not-found or
// KMS code misconfiguration, another 4xx (validation) the request's fault —
// while a server fault (a 5xx, InternalException, ServiceUnavailable) came
// after the service received the call and may have put the event, so it is
// Uncertain. A connection that was never made is transient; any other
// transport failure (a timeout or reset after sending, a lost reply) is
// Uncertain.
//
// IAM: the caller needs events:PutEvents on the bus ARN only.
package eventbridge
