// Package contract defines what a provider is: the request a worker sends, the
// result it saves, the optional readback and idempotency capabilities, and the
// schema of the "generate" input.
//
// It is a leaf so that the adapters (simulated, bedrock, openai) and the
// factory in package provider can all depend on it without an import cycle.
// Callers outside internal/provider use the same names through package
// provider, which re-exports every identifier here as an alias; only adapters
// import contract directly.
//
// # Errors
//
// Generate steers the worker with the constructors of pkg/retrypolicy:
// Retryable or Throttled (transient; safe to send again), Permanent (the
// task's input is at fault), Misconfigured (credentials, permissions, model id:
// park for a person) and Uncertain (the provider may have performed the
// generation: the worker must not blindly re-send, see DESIGN.md §1.4). An
// adapter that can prove nothing left the process wraps
// retrypolicy.ErrRequestNotSent.
//
// Lookup returns [ErrNotFound] when the provider credibly never performed the
// operation (re-sending is safe) and [ErrNoReadback] when it cannot tell.
//
// # Token bounds
//
// [CallMaximumWith] is the most one generation can use: prompt and system
// bytes + [InputOverheadTokens] (a token is at least a byte of text), each
// document's [DocumentTokens] (text formats: their bytes; png and jpeg:
// [ImageTokens]; pdf, docx, doc: [OpaqueDocumentTokens], the model's
// context window, since a compressed container's size bounds nothing),
// and MaxTokens or [MaxTokensLimit]. Budgets reserve it, admission
// estimates it and the submit handler checks a token budget against it,
// so all three agree.
//
// # Privacy
//
// Errors and String methods carry ids, sizes, hashes, codes and the provider's
// own short error text, never the prompt, the system text, the generated text
// or a credential.
package contract
