// Package email is the "email" destination: one Amazon SES v2 SendEmail per
// delivery, from a sender identity named in configuration, to recipients the
// deployment allows.
//
// # Recipients: configuration decides
//
// A deliver request names its recipients ({"to":["ops@example.com"],
// "subject":"…"}), but only addresses configuration allows are accepted:
// Options.AllowedRecipients lists exact addresses and whole domains
// ("@example.com"). An address outside the list is refused when the task is
// submitted (destination.ParamsChecker: a 400 naming params.to) and again
// before any send, so a caller can never make the deployment mail an address
// it did not allow. The sender (Options.From) and the configuration set are
// configuration only; params cannot name them.
//
// # The message
//
// Subject: params.subject, else "Delivery <operation id>". Text body: the
// payload's "text" string when it has one (a generate task's result), else
// the payload as indented JSON, followed by a footer naming the operation
// id, the payload hash and the provenance. The same facts travel as headers
// X-Taskledger-Operation-Id, X-Taskledger-Payload-Sha256 and
// X-Taskledger-Provenance, and the operation id as the SES message tag
// operation_id (visible in SES event publishing).
//
// # Guarantees
//
// None: SendEmail takes no idempotency key and SES keeps nothing a sender
// can read back by operation id. So the SDK's retries are switched off for
// the call (a retry after a lost reply is a second email), and an uncertain
// outcome parks the task unknown_outcome (destination.Decide) for a person,
// who can check the recipient's mailbox or SES event publishing for the
// operation_id tag.
//
// # Outcomes
//
//	a message id                              receipt (provider_ref: the SES message id)
//	TooManyRequests, LimitExceeded            Throttled: SES refused, sent nothing
//	MessageRejected, MailFromDomainNotVerified,
//	AccountSuspended, SendingPaused, NotFound,
//	access denied                             Misconfigured (sender identity,
//	                                          sandbox, account)
//	BadRequest                                Permanent
//	InternalServiceError and other 5xx        Uncertain: SES may have accepted it
//	connection never made                     Retryable (not sent)
//	any other transport failure               Uncertain
//
// IAM: the caller needs ses:SendEmail on the sender identity (and the
// configuration set, if any).
package email
