// Package deliver runs a deliver task (DESIGN.md §10) on the machinery that
// runs a generate task: the worker and the reconciler see the destination a
// deliver task names as a provider bound to that task (Step), so claim,
// fencing, heartbeat, call-start mark, unknown, readback and review work
// unchanged. One engine, two adapter families.
//
// # The step
//
// Bind parses the task's input (destination.ParseDeliverInput) and looks
// the destination up in the registry. The Step's Generate is
// Destination.Deliver with the task id as operation id; its output is the
// destination's Receipt as JSON, which becomes the task's result (the
// deliver task's result is its receipt). HonoursIdempotencyKey and
// OffersReadback report the destination's Guarantees for this request, so
// the worker re-sends an uncertain delivery only to an idempotent
// destination, marks the call start only where neither readback nor
// idempotency could tell what happened, and otherwise leaves the task
// unknown for the reconciler.
//
// Lookup is destination.Resolve, i.e. destination.Decide's rule, spoken in
// the provider's readback vocabulary:
//
//	found                               the receipt (readback_at, readback_result)
//	credible not found                  contract.ErrNotFound + ErrAbsent: re-queue (or, cancelled while running: cancelled)
//	idempotent (no proof of absence)    contract.ErrNotFound: re-queue, send again (cancelled while running: park)
//	no readback, not idempotent         contract.ErrNoReadback: park unknown_outcome
//	not found, not credible (a lag)     ErrNotYetVisible: stay unknown, read back
//	lookup failed, no credible answer   the error: read back again next run
//	  (a publish URL showing other content: maybe overwritten, not absent)
//
// The reconciler reads an unknown task back every run until its age budget
// ends, then parks it unknown_outcome with what the last readback said: a
// delayed readback (publish) is re-checked within the budget before any
// park, and a non-idempotent destination is never called again unless the
// readback proved absence.
//
// A task whose input is invalid or whose destination is not configured
// binds to a step that refuses every call: the input fails the task
// (retrypolicy.Permanent), a missing destination parks it (Misconfigured).
//
// # Configuration
//
// ParseConfig reads the registry from JSON (env TASKLEDGER_DESTINATIONS):
// simulated destinations with their guarantees and faults, named webhook
// endpoints with their Secrets Manager secrets, an EventBridge bus, named
// Lambda functions (with or without lookup) and an email sender with its
// allowed recipients.
// Build turns it into a destination.Registry.
package deliver
