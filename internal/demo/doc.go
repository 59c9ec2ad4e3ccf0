// Package demo is the seed workflows (DESIGN.md §10; shared/seeds 000, 001
// and 004) as runnable scenarios, shared by `make demo`
// (cmd/taskledger-demo) and the end-to-end tests (scenarios_test.go, on
// kumo and moto). A scenario drives a running local stack only through
// its HTTP API, as a user would — submit, poll GET /tasks/{id}, approve
// with the exact result hash shown, withdraw, reject — and then checks what
// could go wrong: states, the approval, every receipt field, and the
// simulated destination's own count of side effects.
//
// The destinations run with Destinations (TASKLEDGER_DESTINATIONS's JSON):
// every delivery is accepted and its reply lost (accept_lose_reply=1), and
// a delivery becomes visible to readback only ReadbackDelay after it
// happened. So each delivery goes unknown, is never re-sent (the simulated
// destinations are not idempotent), and completes only when the
// reconciler's readback finds it: notify by operation id (000), publish by
// its public URL and content hash (001), crm by client reference (004).
//
//	000 document review   approval required, one notify delivery, lost reply
//	                      read back: exactly one notification
//	001 publishing        approval, publish with a public readback that lags:
//	                      completed only after content_hash_match
//	004 crm follow-up     a crm record with an unknown outcome resolved by
//	                      lookup (exactly one record); then an approval
//	                      withdrawn before execution (the worker held with
//	                      Target.Hold): deliveries cancelled, no record ever
//	015 people            the requester's GET /tasks, the approver's GET
//	                      /approvals (with the plan) and approval; a lambda
//	                      delivery to the example function (make demo: the
//	                      built function under aws-lambda-rie; the tests: its
//	                      handler in process) with the function's receipt,
//	                      confirmed by its lookup; the approvers' email
//	                      notification in the emulator's SES
//
// Nothing here logs task text; Print shows hashes, ids and receipts.
package demo
