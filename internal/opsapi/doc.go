// Package opsapi is the operator's HTTP API behind the local web page's
// review view: list and read the dead-letter review table, and act on an
// item (retry, or resolve as completed or failed).
//
// # Routes
//
//	GET  /reviews               open items, oldest first; ?limit=1..100 (50), ?cursor=
//	GET  /reviews/{id}          one item (open or resolved) and its task
//	POST /reviews/{id}/retry    {"by":"...","note":"...","park_count":N}
//	POST /reviews/{id}/resolve  {"outcome":"completed|failed","note":"...","by":"...","park_count":N}
//	GET  /overview              counts for the page's Overview tab (internal/overview):
//	                            live tasks and oldest age per state, open reviews by
//	                            reason, per-minute rates; no task text, no ids
//
// Mount it under a prefix with http.StripPrefix. POST bodies must be
// application/json (at most 16 KiB): a browser cannot send that
// cross-origin without a CORS preflight, which this handler never grants,
// so a foreign page cannot act on the operator's behalf. A page that
// rebinds its own domain to 127.0.0.1 (DNS rebinding) is same-origin to
// the browser, so the handler also checks Host: only its own loopback
// address (Handler.Hosts, LoopbackHosts) is served; any other name is 421
// host-not-allowed and nothing runs. Handler.Guard applies the same rule to
// any handler: the local stack wraps its whole server with it.
//
// # Model
//
// An action is ledger.Act: one transaction over the review item and its
// task, conditioned on the item being open and the task parked, audited on
// the item (resolved_by, resolved_at, resolution, resolution_note). After a
// retry that changed something, the handler sends the task's SQS message;
// if that send fails the task is still queued with a dispatch deadline and
// the reconciler's outbox relay sends it. park_count (optional) is the
// park the action was decided on, the item's park_count as read: the
// action then decides that park alone. Repeating an action that was
// already applied to its park is not an error: 200 with "replayed": true,
// and nothing is sent again; so is a retry given an earlier park of a task
// without an approval gate (only a retry lets such a park be followed by
// another), whose "review" is the item as it is now. A different action on
// a resolved item is 409, and so is any other action given an earlier park
// than the item's: the task was parked again, nobody has decided the new
// park, nothing changes. Without park_count the action decides the item
// open now, so a repeat after the task was parked again decides the new
// park. A retry of
// a budgeted task first keeps its chain's and its own budget items alive
// (Handler.Budgets, spend.Accountant.Keep); when one is gone though it may
// have held spend (the task is older than the items' retention), the retry
// is 409 budget-record-expired and nothing changes.
//
// # Errors
//
// Errors are application/problem+json (RFC 9457) with a stable type
// "https://taskledger.dev/problems/<slug>" (the public API's base):
// invalid-request (400, a bad query parameter), host-not-allowed (421),
// malformed-json (400),
// bad-cursor (400), invalid-action (400), not-found (404), state-conflict
// (409), budget-record-expired (409), body-too-large (413),
// unsupported-media-type (415), throttled
// (503, Retry-After) and internal (500).
package opsapi
