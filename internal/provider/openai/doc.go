// Package openai is a provider for OpenAI-compatible chat completions APIs
// (OpenAI itself, and servers that mimic it), over plain net/http.
//
// Each Generate is one POST {BaseURL}/chat/completions with
// "Authorization: Bearer <key>" and "Idempotency-Key: <operation id>". Some
// compatible servers deduplicate on that header; declare it with
// Options.HonoursIdempotency, which HonoursIdempotencyKey reports. The
// provider never re-sends a request on its own: the request body has no
// GetBody, so net/http cannot replay it after a connection failure either (it
// would, for a POST carrying an Idempotency-Key). The one exception is a 401
// with a cached key that has since rotated, which the server did not process.
//
// Whether the request was written is tracked with net/http/httptrace, so a
// failure before the write (dial, DNS, a context already done) is Retryable
// with retrypolicy.ErrRequestNotSent, and a failure after it (timeout,
// connection reset, an unreadable 2xx body, a 504 from a gateway) is
// Uncertain. There is no readback: Lookup returns contract.ErrNoReadback.
//
// A request with documents is refused before anything is sent
// (ErrDocumentsUnsupported, permanent): chat completions have no portable
// document part, and dropping them would answer another question.
//
// # The key
//
// The key comes from a KeySource: EnvKey (an environment variable, by
// default OPENAI_API_KEY) or SecretsManagerKey (a Secrets Manager secret,
// cached). The key never appears in an error, in String/GoString output, or
// in any fmt or slog rendering of the provider or its key sources; the
// server's error message is dropped on 401/403 (servers echo key fragments
// there), redacted of the key, and withheld when it quotes the prompt.
package openai
