// Package web is the browser page of taskledger: plain HTML, JavaScript and
// CSS with no framework, no build step and no network loads of its own,
// embedded in the binary as [FS] and served at "/" by the local stack
// (internal/local). The same files can be hosted anywhere (an S3 bucket, a
// static site) and pointed at a deployed API.
//
// # Model
//
// The page is a client of the HTTP API of DESIGN.md §5 (api/openapi.yaml)
// and of the local stack's review API (/reviews):
//
//   - API base URL: the page's own origin unless the ?api= query parameter
//     or a value remembered in localStorage names another (a deployed API
//     Gateway URL; its CORS allow-list must hold the page's origin).
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
//     parent, with its own key) and Cancel (409 explained).
//   - Review view: the open review items with their summary and known /
//     uncertain / safe-action lists, and Retry / Resolve buttons recorded
//     with the operator's name.
//
// The pure logic (key per press, retry timing, API base resolution, input
// building) is in static/lib.js and unit-tested with node's test runner
// (web/test/lib.test.mjs); the page as a whole is tested in headless
// Chromium driven by playwright-core (web/test/browser.mjs, run by
// browser_test.go against an in-process local stack).
//
// Task text is written to the DOM only as text (never as HTML) and never to
// the URL or to web storage; only task ids and states are remembered, in
// sessionStorage.
package web
