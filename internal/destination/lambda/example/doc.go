// Package example is a receiving function that keeps the lambda
// destination's contract (docs/destinations.md): the team-side example
// that cmd/taskledger-example-destination runs as a Lambda function.
//
// # Model
//
// Its effect is a record: one item per operation id in its own store (a
// DynamoDB table deployed, memory when run locally), written with one
// conditional put. Writing the record is the act, so the function acts at
// most once per operation id by construction: a repeated delivery finds the
// record and answers the same receipt without acting again, and a lookup
// reads the record back consistently, so its "not found" is credible.
//
//	{"action":"deliver","operation_id":…,"payload_sha256":…,"payload":…}
//	    → {"receipt":"ex_…","operation_id":…,"duplicate":false}
//	{"action":"lookup","operation_id":…}
//	    → {"found":true,"receipt":"ex_…"} | {"found":false}
//
// Refusals use the contract's error types: a *Rejected error (errorType
// "Rejected": a malformed event, a payload whose hash is not
// payload_sha256, an operation id already used for another payload) and a
// *Retryable error (errorType "Retryable": the store refused the write for
// now, e.g. throttled, and nothing was recorded). Any other failure (the
// store's reply lost, a crash) surfaces as an ordinary error, which the
// destination treats as "may have acted" and resolves by lookup.
//
// It logs operation ids and hashes, never payloads.
package example
