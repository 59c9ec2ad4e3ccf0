// Package simulated provides deterministic, seeded stand-ins for three
// destinations of the seed workflows, with fault injection and a ledger that
// counts real side effects per operation id:
//
//	notify   one notification to {"to":...}; readback by operation id
//	publish  the payload at PublicBase+{"slug":...}; readback fetches the
//	         canonical URL and compares the content hash (content_hash_match)
//	crm      a record with {"client_reference":...} (default: the operation
//	         id); readback looks the reference up
//
// # Side effects
//
// A side effect is a delivery performed. By default the destinations are
// not idempotent — every accepted Deliver is a new side effect, as with a
// real receiver that ignores idempotency keys — so a duplicate is visible in
// SideEffects, TotalSideEffects and Snapshot, and tests and the soak can
// assert "at most one side effect per operation id". With
// Options.Guarantees{Idempotent: true} a repeated operation id returns the
// first delivery's receipt and counts nothing.
//
// # Faults
//
// AcceptLoseReply performs and records the delivery, then answers
// retrypolicy.Uncertain. Throttle (429 with Retry-After), ServerError (503)
// and Reject (422) deliver nothing. A fault comes from a per-operation
// script (Destination.Script) or else from seeded rates (Options.Faults,
// ParseFaultPlan) drawn from a hash of (seed, name, operation id, attempt),
// so a run is reproducible whatever the interleaving.
//
// Options.ReadbackDelay makes a delivery visible to Lookup only that long
// after it happened, read from Options.Now (a settable clock in tests, not
// sleeps). Until then Lookup answers ErrNotFound — which is why the default
// guarantees declare "not found" credible only without a delay.
//
// Only "nothing was delivered under the key" (for publish: no page at the
// URL) is ErrNotFound. A publish URL showing other content answers
// ErrOtherContent: a later delivery to the same slug may have overwritten
// this one, so it is no evidence of absence, and an uncertain delivery read
// back that way stays unknown and is parked, never published again over the
// newer content.
//
// # Guarantees
//
// DefaultGuarantees: not idempotent; readback by operation id (notify) or
// by reference (publish, crm); NotFoundCredible when ReadbackDelay is 0.
// Options.Guarantees replaces them (readback "none" makes Lookup answer
// ErrNoReadback). Nothing here logs; errors carry names, ids and codes, never
// the payload.
package simulated
