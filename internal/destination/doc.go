// Package destination is the seam between a deliver task and the effect it
// performs: a notification, a publication, a CRM record, a webhook, an
// event (DESIGN.md §10). Providers generate; destinations deliver. Both run
// on the same ledger, claim, fencing, unknown, readback and review
// machinery — this package holds only the destination side of it;
// package deliver wires it into the worker and the reconciler.
//
// # Model
//
// A deliver task's input is parsed with ParseDeliverInput:
//
//	{"destination":"notify","params":{"to":"requester@example.com"},"payload":{...}}
//
// Requests name a destination registered in a Registry, never a URL. The
// worker calls Destination.Deliver with a Request whose OperationID is the
// deliver task's id (the same for every attempt) and whose PayloadSHA256 is
// the hash of the exact payload bytes (HashPayload; Request.Validate refuses
// a mismatch). A success returns a Receipt: operation id, payload hash,
// destination and destination identity (endpoint host, bus ARN, account),
// the destination's own reference, a public URL, and — after a readback —
// when it was read back and what was found.
//
// # Guarantees and the rule
//
// Every destination declares Guarantees: whether it is idempotent (honours
// the operation id), how it can be read back (none, by_operation_id,
// by_reference) and whether its "not found" is credible evidence that the
// delivery never committed. The safe default — the zero value — is "none of
// these": destinations are assumed to ignore idempotency keys. A destination
// whose promises depend on the request (a webhook: per endpoint) implements
// RequestGuarantees.
//
// Deliver's errors steer with pkg/retrypolicy exactly like a provider's:
//
//	Retryable, Throttled  the destination refused and did not act: retry
//	Permanent             the request is at fault: fail
//	Misconfigured         endpoint, secret, permission: park
//	Uncertain             the destination may have acted: unknown
//
// Decide states the rule for what follows: an uncertain outcome on a
// non-idempotent destination is never re-sent. It is read back (Looker,
// Resolve); found completes with the read-back receipt, a credible "not
// found" re-queues, anything else parks the task as unknown_outcome for a
// person. Only an idempotent destination may be re-sent without proof.
//
// # Implementations
//
//	webhook      internal/destination/webhook: HTTPS POST to an endpoint named
//	             in configuration, Standard Webhooks signature, readback
//	simulated    internal/destination/simulated: notify, publish, crm with
//	             fault injection and side-effect counting
//	eventbridge  internal/destination/eventbridge: PutEvents to a configured bus
//	lambda       internal/destination/lambda: Invoke of a function named in
//	             configuration, lookup action as readback
//	email        internal/destination/email: SES v2 SendEmail to allowed
//	             recipients, no readback
//
// # Privacy
//
// Nothing here logs. Errors carry ids, hashes, sizes, field names and
// status codes, never a payload, a params value or a secret.
package destination
