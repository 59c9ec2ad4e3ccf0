// Package web is the browser page of taskledger: plain HTML, JavaScript and
// CSS with no framework, no build step and no network loads of its own,
// embedded in the binary as [FS] and served by the submit handler
// (internal/api) at "/" (index.html) and "/static/{file}" — deployed, on the
// API's own routes (same origin: no CORS), and locally by the local stack
// (internal/local), with a strict Content-Security-Policy. index.html
// names its files as static/…, relative, so a stage path prefix works.
//
// # Model
//
// The page is a client of the HTTP API of DESIGN.md §5 (api/openapi.yaml)
// and of the local stack's review API (/reviews):
//
//   - API: the origin that served the page, always. The page's URL is
//     hostile input (anyone can link to the genuine page with any query),
//     so nothing in it and nothing remembered names another API, issuer or
//     endpoint (an API base an older page remembered in localStorage is
//     cleared on load); only the OIDC code and state are read from it, on
//     the way back from the issuer, against the sign-in this tab started.
//   - Submit: every press of Send is one logical request with a new
//     Idempotency-Key (crypto.randomUUID). Automatic retries of that press,
//     after a network error or 503/429 (waiting Retry-After, else full
//     jitter backoff), send the same key, so they can only ever produce the
//     one task. The Send button is disabled while a request is in flight,
//     and the second click of a double click reuses the first click's key,
//     so a double click never creates two tasks. 202 (new task) and
//     200 + Idempotent-Replayed (existing task) are shown differently.
//   - Task view: the task's live state, polled about once a second until it
//     is terminal or parked (needs_review), with attempts, result, last
//     error, receipt and review block; Regenerate (a new task linked to its
//     parent, with its own key) and Cancel (200 cancelled; 202 for a running
//     or unknown task, saying how it may still end; 409 explained).
//   - Sign-in: GET /auth/config names the API's auth mode. In "jwt" the
//     page signs in with OpenID Connect, authorization code + PKCE (S256)
//     against the issuer's discovery document, state and nonce checked, no
//     client secret; the redirect URI is the page's URL without query. The
//     tokens stay in sessionStorage (never localStorage); every API call
//     sends Authorization: Bearer with the access token when it is a JWT
//     naming the client (aud, or client_id as in Cognito access tokens),
//     else the ID token — the token API Gateway's JWT authorizer accepts
//     with audience = client id. The issuer is the one the page's own
//     GET /auth/config names; the authorization and token endpoints must be
//     on the issuer's origin or on the origin of the authorization endpoint
//     /auth/config names (Cognito's hosted UI), else sign-in is refused. A
//     401 sends the user to sign in again, without a click at most once per
//     page load (a second 401 shows a message and the Sign in button; right
//     after a sign-in the API's issuer or audience is wrong, and the page
//     says so). Sign out forgets the tokens in this tab. In "none" a banner
//     says the API is open to anyone; in "iam" the page says it cannot sign
//     requests. The task list is kept per user.
//   - Approval (static/approval.js, DESIGN §10): the submit form can ask
//     for an approval gate ("Require approval") and one delivery (notify,
//     publish or crm with a params JSON object; checked in the page before
//     anything is sent). A task awaiting approval shows its result and
//     result_sha256 with Approve, Edit & approve (the result's text, or its
//     JSON, edited and sent as edited_result with the shown hash) and
//     Reject, each with a note. Every decision carries the hash this tab
//     shows: a result changed since is a 409 artifact-changed, said with
//     both hashes, and the current result is loaded. After an approval the
//     deliveries are listed with their states (polled until settled), each
//     opening its deliver task with its receipt (destination, identity,
//     provider ref, public URL, readback, approver, policy; missing fields
//     show "—"); Withdraw approval cancels unstarted deliveries, and a 409
//     deliveries-started names each started delivery and its state.
//   - Documents (static/documents.js, pure helpers in static/doclib.js;
//     DESIGN §12): the submit form attaches up to 5 files. A file whose type
//     (by extension, else the browser's type) or size the API would refuse
//     is refused before any request, naming the accepted types and limits.
//     Otherwise it is hashed (SHA-256, Web Crypto), declared (POST /uploads
//     with a page-chosen upload id, so a retried declaration is the same)
//     and PUT to the presigned URL with the headers the API named (less
//     Content-Length); Send is disabled while a file hashes or uploads. The
//     submit names the ready uploads and never uploads again, so retries of
//     a press send the same documents under the same key. Document problems
//     of the submit (upload-mismatch, upload-not-received, unknown-upload,
//     …) mark the named file failed, in words, in an aria-live region by
//     the file field. The task view lists the task's documents.
//   - Streamed replies (static/stream.js; docs/streaming.md): while the
//     task in view runs, "Reply so far" shows its text as the provider
//     generates it, from the WebSocket GET /auth/config names
//     (stream_url; the session's bearer offered as the subprotocol
//     bearer.<JWT>). A frame of a higher attempt replaces a lower one's
//     text; a done frame makes the poll read the task at once; the box is
//     hidden once the task has its saved result, which is the truth.
//   - Chat (static/chat.js, pure helpers in static/chatlib.js; seed 003):
//     a conversation is the caller's generate tasks sharing a
//     conversation_id the page chose (random, [A-Za-z0-9_-]). Send submits
//     the conversation so far (each turn whose reply was saved) plus the
//     new user turn as input.messages; the reply streams in (stream.js
//     open) and is replaced by the saved result of GET /tasks/{id}, or,
//     without a stream, shows the task's progress.summary while polled.
//     Stop cancels the running reply; Regenerate is POST
//     /tasks/{id}/regenerate on the last reply (a new task in the same
//     conversation). A re-press of Send after the automatic retries gave
//     up reuses the key while the conversation and the message are the
//     same (the key and the body's SHA-256 in sessionStorage, never the
//     text); a changed message gets a new key. Documents attached in the
//     tab (documents.js make) go with every message until removed. Only
//     the conversation id is kept, in the address (#chat=<id>, validated:
//     data, never an origin); after a reload the conversation is read
//     back from GET /conversations/{id}, and recent conversations from
//     GET /tasks?kind=generate grouped by conversation.
//   - My tasks (static/tasks.js, pure helpers in static/listlib.js):
//     GET /tasks, the caller's tasks newest first, with the API's state
//     and kind filters, "Load more" passing next_cursor back unchanged,
//     and each row's state, kind, times, progress.summary and a link into
//     the task view. While the tab is shown and the page visible it reads
//     the list again every 3 s, walking as many pages as are shown from
//     the top (a new task pushes the oldest row into Load more; none is
//     skipped or shown twice); hidden, it reads nothing. The list is the
//     API's, so a reload, another tab or another device shows the same
//     tasks; "This session’s tasks" still lists this tab's.
//   - Waiting for my decision (static/inbox.js): GET /approvals, oldest
//     deadline first, each result beside its plan (approval.js's
//     planInto), the deadline as a time and "in 2 d 23 h", and Approve /
//     Reject with a note. Approve sends the result_sha256 of the result on
//     screen and the approval round it was read in; a result the list
//     does not inline (kept in the payload bucket) is said so and loaded
//     with GET /tasks/{id} before Approve is offered; a 409
//     artifact-changed shows the current result to decide again. A
//     decided item leaves the list. Sign out clears both lists.
//   - Review view: the open review items with their summary and known /
//     uncertain / safe-action lists, and Retry / Resolve buttons recorded
//     with the operator's name.
//   - Overview (static/overview.js, chart helpers in static/chart.js):
//     GET /overview of the local stack's operator API (internal/overview;
//     counts only) every 3 s while the tab is shown and the page visible,
//     drawn as inline SVG built with createElementNS and styled by class
//     (the CSP holds): live tasks per state and the oldest task's age per
//     state as bars, completions / failures / parks / retries / provider
//     calls / tokens / cost per minute as sparklines ("no data" for usage
//     the worker does not record), open reviews by reason as bars.
//     Deployed (no /overview) it points to the CloudWatch dashboard.
//
// The pure logic (key per press, retry timing, API base resolution, input
// building) is in static/lib.js and unit-tested with node's test runner
// (web/test/lib.test.mjs); the page as a whole is tested in headless
// Chromium driven by playwright-core (web/test/browser.mjs, run by
// browser_test.go against an in-process local stack). The sign-in flow is
// tested the same way (web/test/signin.mjs, TestBrowserSignIn) against an
// OpenID Connect issuer from npm (oauth2-mock-server) and the local stack's
// emulated JWT authorizer: two users, the 404 across them, 401 for garbage,
// expired and wrong-audience tokens, re-sign-in after a 401, sign out.
// The Overview tab is tested the same way (web/test/overview.mjs,
// TestBrowserOverview: figures asserted after completing, failing, parked,
// throttled and slow tasks; screenshots overview-*.png, light and dark) and
// its chart helpers with node's test runner (web/test/chart.test.mjs).
// The approval UI is tested the same way (web/test/approval.mjs,
// TestBrowserApproval: approve, a refused withdraw, the delivery's receipt
// view, edit & approve, withdraw while unstarted — the test holds that
// task's deliveries back from the worker through local.Options.WrapWorker —,
// a stale tab's approve refused with 409 artifact-changed, reject; then the
// ledger is checked; screenshots approval-*.png).
// Document attachments are tested the same way (web/test/documents.mjs,
// TestBrowserDocuments: refused type and
// size with no request, a .txt and a .png uploaded and submitted through a
// 503 retry, the simulated provider's reply naming each SHA-256, an altered
// upload refused with upload-mismatch; then the ledger is checked;
// screenshots documents-*.png) and doclib.js in web/test/lib.test.mjs.
// The Chat tab is tested the same way (web/test/chat.mjs, TestChatBrowser:
// three streamed turns seen growing and ending as the saved result, a
// reload, Regenerate, Stop, a re-press after failed retries getting the
// same task, a document, a reply followed without a stream; then the
// ledger is checked; screenshots chat-*.png, light and dark) and
// chatlib.js in web/test/chatlib.test.mjs (TestChatLogic).
// The lists are tested the same way (web/test/lists.mjs, TestListsBrowser:
// three tasks of two kinds newest first, filters, a held task's retry_wait
// progress, a reload with empty storage, a task appearing live and no
// reads while the tab is hidden, Load more; two gated tasks by deadline,
// result beside plan, an HTML plan param shown as text, a result left out
// of the list loaded before Approve, reject and approve with the shown
// hash, the delivery in the task view, a stale item's approve refused
// (409) and approved again of the result shown after it; then the ledger
// is checked;
// screenshots lists-*.png), with sign-in too (web/test/listsapprover.mjs,
// TestListsApprover: a requester and an approver with the approver claim,
// no self-approval, each in their own profile; the inbox shows the
// requester's task to the approver only, every list read carries its
// reader's bearer, sign out clears the rows and stops the reads), and
// listlib.js in web/test/listlib.test.mjs (TestListsLogic).
// The scripts share web/test/harness.mjs (Chromium launch, steps, checks,
// screenshots, the one-line JSON report; signin.mjs opens its own
// two-origin context) and the Go tests share harness_test.go (the local
// stack, the screenshot directory, running a script and reading its
// report, the PNG checks).
//
// Task text is written to the DOM only as text (never as HTML) and never to
// the URL or to web storage; only task ids and states are remembered, in
// sessionStorage.
package web
