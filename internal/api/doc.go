// Package api is taskledger's HTTP API: the API Gateway HTTP API (payload
// format 2.0) handler behind functions/submit, and a net/http adapter that
// serves the same handler locally.
//
// # Routes
//
//	POST /tasks                   submit a task (Idempotency-Key required)
//	GET  /tasks                   the caller's tasks, newest first (list.go; state, kind, limit, cursor)
//	GET  /approvals               the tasks awaiting a decision the caller may make, oldest deadline first
//	GET  /tasks/{id}              read a task
//	POST /tasks/{id}/regenerate   a new task linked to its parent (Idempotency-Key required)
//	POST /tasks/{id}/cancel       cancel a queued or retry_wait task (200), or a running one, or an unknown one
//	                              with no cancel pending (202: cancel.go); a cancelled one again 200, else 409
//	POST /tasks/{id}/approve      approve a gated task's result; creates its deliveries
//	POST /tasks/{id}/reject       reject it
//	POST /tasks/{id}/withdraw     withdraw an approval whose deliveries have not started
//	POST /uploads                 declare a document upload; a presigned PUT (uploads.go)
//	GET  /conversations/{id}      the caller's tasks in one conversation, oldest first (conversation.go)
//	OPTIONS on each               CORS preflight
//	GET  /                        the browser page (package web), public
//	GET  /static/{file}           its scripts and stylesheet, public
//	GET  /auth/config             how the page signs in (AuthConfig), public
//
// The public routes have no authorizer in front of them: the page must load
// and learn its issuer before it has a token. They are served with a strict
// Content-Security-Policy (Handler.ContentSecurityPolicy), nosniff,
// no-referrer, no framing, and ETags; index.html is revalidated on every
// load, the other files are cached for five minutes.
//
// A generate submit may name up to MaxDocuments uploads in "documents"
// (documents.go): each is resolved against its declaration and copied to
// its content address before the item is written, and their SHA-256s join
// the payload hash. Another caller's upload is reported exactly like an
// unknown one (422 unknown-upload).
//
// A generate input may carry "messages" and a "conversation_id"
// (conversation.go, contract.ParseGenerateInput): they are part of the
// input, so the payload hash, the input cap and the S3 claim-check cover
// them; the task keeps the conversation id and its by_conversation key.
// Every task view carries "progress" (progress.go), computed from the item.
//
// api/openapi.yaml is the published contract; the tests validate every
// response the handler gives against it.
//
// A submit is {"kind":"generate",…} or {"kind":"deliver","input":
// {"destination","params","payload"}} (DESIGN §10; deliver.go): a deliver
// input is checked against Handler.Destinations — a destination that is not
// configured, or params it does not accept, is a 400 naming the field, and
// nothing is written. Its task view's receipt carries the delivery fields
// (view_deliver.go).
//
// # Idempotency
//
// A task's id is derived from the caller's scope and the Idempotency-Key
// with a server secret (Ledger.TaskID: HMAC-SHA256 under the deployment's
// task id key), so the ledger's single conditional PutItem is the
// deduplication and nobody can compute a task id from a key. The payload hash is SHA-256 over a canonical JSON form of
// {"budget","input","kind","parent_task_id"} ("budget" only when a submit
// has one, its cost as 6 decimals): object keys sorted, no insignificant
// whitespace, numbers kept as written (json.Number), so key order and
// whitespace never change it. The same key with the same payload replays the
// existing task (200, Idempotent-Replayed: true) for as long as the ledger
// keeps it (ledger.DefaultRetention, 7 days after it ends); the same key with
// another payload is 422 and writes nothing.
//
// # Payloads in S3 (Handler.Payloads)
//
// With a claim-check store (DESIGN §12; payloads.go) an input above its
// inline threshold (4 KiB of canonical JSON) is put content-addressed in S3
// before the item, which keeps only the reference; the payload hash is
// computed before, over the canonical request, so replays and 422s are
// unchanged. A small input makes no S3 call. The task view reads an
// offloaded result back (verified) and adds receipt.result_bytes and
// result_sha256; one over MaxViewResult is described, not shown.
// Regenerate reads an offloaded parent input. S3 trouble that may pass is
// 503 with Retry-After (nothing recorded); anything else is 500.
//
// # Approval gates
//
// A submission's optional "approval" and "deliver" members (plan.go) are
// validated strictly, stored on the task and hashed with the payload
// (payloadHashPlan: unchanged for a submission without a plan). approve,
// reject and withdraw (approval.go) read the task, check the
// ApprovalPolicy (owner, or an approver claim; self-approval a setting),
// and call the ledger's one-transaction decisions; an approval builds one
// deliver task per plan entry for the approved artifact
// (newApproveRequest, shared with the operator CLI) and sends their
// outbox messages after the transaction. The view adds result_sha256,
// approval and deliveries, and the plan (each destination and its params)
// for a caller who may decide (approvalview.go).
//
// A deliver task submitted directly skips the gate, so it is a permission
// of its own (directdeliver.go): DirectDeliver (ApproversOnly by default)
// refuses it 403 before its input meets the destinations. Every deliver
// task records where it came from — the approval's task, artifact,
// decider and round (set by the ledger's Approve), or the submitting
// caller — and its destination carries that provenance to the receiver
// inside what it signs; the view shows it.
//
// # Caller scope
//
// The scope is read from the authorizer context API Gateway attaches:
// "jwt:<sub>" for a JWT authorizer, "lambda:<sub or principalId>" for a
// Lambda authorizer, and "anonymous" when there is no authorizer (local
// runs, or a deployment without one). IAM scopes name only what the caller
// cannot choose (scope.go): an IAM user's ARN, or for an assumed role the
// role ("iam:arn:P:iam::ACCT:role/ROLE") — the session name is the
// caller's choice, so every principal that may assume a role shares its
// tasks; a federated user (named by its caller) is refused.
// NewHTTPHandler passes on an authorizer context a middleware attached with
// WithAuthorizer (the local stack's JWT authorizer emulation). An
// authorizer context without an identity is 401, and so is a request
// without one when AuthConfig.Mode is jwt or iam (a route left open by
// mistake). Scope is part of the task id, so another caller's task is
// indistinguishable from a missing one (404) and another caller reusing
// your key gets their own task. Without an authorizer (mode none) every
// caller shares the anonymous scope: the keyed id derivation is what keeps
// a known key from naming a task, and a 422 never names the task.
//
// # Spend (spend.go)
//
// A submit's "budget" is validated strictly and stored on the task; a
// regenerate inherits its parent's budget and chain root. A token budget
// that cannot cover one call of the task — contract.CallMaximumWith: the
// prompt, each document's bound, the output — is a 400 naming the
// documents; with documents it is checked once they are resolved and
// before they are copied (resolveDocuments' check), at a regenerate with
// the inherited documents. With a daily
// quota configured (Handler.Quotas), submit and regenerate first read the
// caller's quota item (one GetItem) and answer 429 quota-exceeded with
// Retry-After (the next UTC day) when the day's settled usage leaves no
// room for one call of the task (a regenerate: for anything), before
// anything is written — unless a task is recorded under the key (a second
// GetItem, on the refusal only), which is answered as a replay. The
// reservations of calls in flight are not counted (the worker waits for
// them). A task one call of which may use more than the whole quota is
// 422 exceeds-daily-quota (refuseOverQuota, with the documents' bounds).
// The worker reserves each call on the quota and settles it after. A
// budgeted task's view carries its budget, usage and its chain's usage
// (Handler.Budgets). A regenerate of
// a budgeted task extends its chain's budget item first
// (spend.Accountant.Extend, one conditional UpdateItem; a failure is a 503
// before the task is recorded), so a chain growing by regenerates of tasks
// that never called keeps its budget (spend.Accountant.Keep: a parent older
// than the item's retention whose chain's item is gone is 409
// budget-record-expired, what the chain spent being unknown); a parent past
// its expires_at (TTL not there yet) is 404, as ledger.Create treats it. A
// regenerate whose key already names a recorded task (one consistent
// GetItem first, where anything before Create could answer otherwise or
// write) is answered from that task — 200 replay or 422 reuse by its
// payload hash — with nothing checked, renewed, extended or created; so is
// any request whose key a refusal or the quota looked up and found
// (call.recorded: no document adopted, no input placed). A regenerate of a
// parent deleted by its TTL is answered from the task recorded under its
// key when there is one (replayOrphan: input_inherited, or the same input).
//
// # What the worker's provider could never run (providercheck.go)
//
// With Handler.Provider (api.ProviderProfile: the worker's provider, model,
// whether it takes documents, and the model's tokens_per_minute — read
// from the worker's own PROVIDER, PROVIDER_MODEL and PROVIDER_ADMISSION by
// lambdaenv.LoadProvider), a generate task the worker could only fail or
// park is refused with 422 and nothing recorded:
// documents-not-supported when it names documents and the provider takes
// none (checked before the uploads are resolved or copied), and
// exceeds-admission-limit when its call bound — the admission estimate,
// contract.CallMaximumWith with the documents — is above the model's
// tokens_per_minute (checked once the documents are resolved, before they
// are copied; a pdf alone is bounded by 200,000). A regenerate is checked
// with its input and inherited documents before they are renewed. A replay
// (a task recorded under the caller's key, still inside its retention
// window: one past it is gone, as for Create) is never refused: it
// answers that task as before, even after the configuration changed — the
// worker's refusals (permanent_input, parked provider_config) stay as the
// backstop for a change between submit and run. Only a refusal costs a
// read (the GetItem that tells a replay). nil Provider: no check.
//
// # Outbox
//
// The conditional PutItem is the commit point. The SQS message that wakes a
// worker is sent after it; if that send fails the request still answers 202
// (the task is durable), the failure is logged by task id and counted
// (metric DispatchSendFailed), and the reconciler re-sends the message once
// the task's dispatch deadline (due_at) passes. A replay never re-sends.
// A throttled DynamoDB call answers 503 with Retry-After; the failed call
// wrote nothing, and retrying with the same key is always safe.
//
// # Errors
//
// Every error is application/problem+json (RFC 9457) with a stable type URI
// under ProblemBase; see the Type* constants.
package api
