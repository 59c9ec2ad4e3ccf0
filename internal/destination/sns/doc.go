// Package sns is the "sns" destination: one Amazon SNS Publish per
// delivery, to a topic named in configuration.
//
// # Topics: configuration decides
//
// A deliver request names a topic by its configured name
// ({"topic":"approvals","subject":"…"}), never by ARN: Options.Topics maps
// names to topic ARNs, and a name outside it is refused at submit
// (destination.ParamsChecker) and before any send.
//
// # The message
//
// Message: the payload's "text" string when it has one, else the payload
// as JSON, followed by the operation id, the payload hash and the
// provenance. Subject: params.subject (at most 100 bytes), else
// "Delivery <operation id>". The operation id, payload hash and provenance
// also travel as message attributes (operation_id, payload_sha256,
// provenance), which subscription filter policies can match. A FIFO topic
// (".fifo") gets MessageGroupId = the topic name and
// MessageDeduplicationId = the operation id.
//
// # Guarantees
//
// None: Publish to a standard topic takes no idempotency key (a FIFO
// topic's deduplication lasts five minutes, too short to promise), and SNS
// keeps nothing a sender can read back. The SDK's retries are switched off
// for the call, and an uncertain outcome parks the task unknown_outcome
// (destination.Decide) for a person.
//
// # Outcomes
//
//	a message id                             receipt (provider_ref: the SNS message id)
//	Throttled, ThrottlingException           Throttled: SNS refused, published nothing
//	NotFound, AuthorizationError, KMS*,
//	InvalidSecurity, access denied           Misconfigured (topic, key, policy)
//	InvalidParameter                         Permanent
//	InternalError and other 5xx              Uncertain: SNS may have accepted it
//	connection never made                    Retryable (not sent)
//	any other transport failure              Uncertain
//
// IAM: sns:Publish on each configured topic.
package sns
