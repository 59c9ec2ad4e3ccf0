// Package webhook is the "webhook" destination: an HTTPS POST to an endpoint
// named in configuration, signed the Standard Webhooks way
// (https://www.standardwebhooks.com).
//
// # Endpoints, never URLs
//
// A deliver request names an endpoint ({"endpoint":"crm"}); the URL, the
// signing secret's Secrets Manager id, an optional readback URL template,
// its guarantees and a timeout come from configuration (Options.Endpoints).
// A request cannot send a payload anywhere configuration does not name.
//
// # The request
//
// The body is {"type":"taskledger.delivery","timestamp":...,"data":
// {"operation_id","payload_sha256","correlation_id","provenance","payload"}}.
// provenance (destination.Provenance) says where the delivery came from —
// {"type":"approval","task_id","artifact_sha256","decided_by","round"} or
// {"type":"direct","caller"} — inside the signed body: a receiver that
// must only act on approved deliveries verifies the signature, then
// checks provenance.type. Headers:
// webhook-id (the operation id: the deliver task's id, the same for every
// attempt), webhook-timestamp (Unix seconds), webhook-signature
// ("v1,<base64 HMAC-SHA256 of id.timestamp.body>" keyed with the
// endpoint's "whsec_..." secret) and Idempotency-Key (the operation id).
// Secrets are read through a SecretSource; SecretsManager caches them for
// a TTL and drops one when the endpoint answers 401/403, so a rotation is
// picked up.
//
// # Outcomes
//
// 2xx is a receipt (destination_identity is the endpoint's host;
// provider_ref the body's "id" or X-Request-Id). 408, 429 and 503 are
// transient (Retry-After honoured); any other 5xx (a 500 from a handler
// that failed after acting, a 502, a gateway's 504) is Uncertain; 401,
// 403, 404, 410 and redirects are misconfiguration (302, 303 and 409 are
// Uncertain); other 4xx are the request's fault. A failure before the
// request was fully written (refused connection, DNS) is transient and
// provably not sent; one after it was written (timeout, reset, a lost
// reply) is Uncertain. The POST is never replayed by Go's HTTP transport
// (it has no GetBody), and redirects are not followed.
//
// # Guarantees and readback
//
// Receivers are assumed not to deduplicate: an endpoint is Idempotent only
// when configured so. With a ReadbackURL (containing {operation_id}) the
// endpoint is read back by operation id with a signed GET: 200 found, 404
// not found (credible only when NotFoundCredible is configured).
// GuaranteesFor reports each endpoint's guarantees; Guarantees, without an
// endpoint, promises nothing.
//
// Errors name the endpoint, the operation id and the status, never the
// payload or the secret.
package webhook
