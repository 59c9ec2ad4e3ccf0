// Package bedrock is a provider for Amazon Bedrock's Converse API
// (bedrockruntime.Client.Converse, aws-sdk-go-v2).
//
// A generate input becomes one Converse call: the prompt is the single user
// message, the system text a system content block, max_tokens and
// temperature the inference configuration. The result's Output is
// {"text","model","stop_reason","usage":{"input_tokens","output_tokens"}} and
// its ProviderRef is the AWS request id. A request's documents go before
// the prompt in the same message: Converse document blocks (pdf, csv, doc,
// docx, html, txt, md; bytes source, the neutral name) and image blocks
// (png, jpeg) (documents.go).
//
// The SDK's own retries are switched off for Converse (RetryMaxAttempts 1 on
// every call, whatever the client's configuration): a retry after a
// connection reset is a blind re-send of a side-effecting request, and
// transient failures are the worker's to schedule, with its budgets and
// Retry-After.
//
// Errors are steered with pkg/retrypolicy: ThrottlingException and
// ServiceQuotaExceededException are Throttled; ServiceUnavailable,
// InternalServer, ModelNotReady, ModelTimeout are Retryable; ValidationException
// (including an input over the context window) and ModelErrorException are
// Permanent, except a ValidationException about the model identifier, which is
// Misconfigured like AccessDenied, ResourceNotFound, UnrecognizedClient and
// missing credentials; credentials the source could not give (STS or a
// container endpoint answering 5xx or 429) are Retryable — both with
// retrypolicy.ErrRequestNotSent: Bedrock was never sent the request. A
// "guardrail_intervened" or "content_filtered" stop reason is Permanent with
// retrypolicy.ErrActed (the model ran and billed: no refusal). Whether the
// request was written is tracked with
// net/http/httptrace: a failure before (dial, DNS, context) is Retryable with
// retrypolicy.ErrRequestNotSent, a failure after (timeout, reset, an
// unreadable response) is Uncertain.
//
// Bedrock keeps no record by idempotency key, so there is no readback
// (Lookup returns contract.ErrNoReadback) and HonoursIdempotencyKey is false.
package bedrock
