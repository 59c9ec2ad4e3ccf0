// Package provider is the seam between a task and the expensive,
// non-deterministic, side-effecting step that performs it: an LLM generation.
//
// # Model
//
// A worker calls Provider.Generate with a Request whose OperationID is the
// task id: the same for every attempt, so a provider that deduplicates by it
// (IdempotencyHonouring) turns a re-send into a harmless replay. Attempt is
// for tracing only. Generate's error tells the worker what to do next through
// the classes of pkg/retrypolicy:
//
//	Retryable, Throttled  transient: retry_wait (honouring Retry-After)
//	Permanent             the task's input is at fault: failed
//	Misconfigured         credentials, permission, model id: needs_review
//	Uncertain             the provider may have performed it: unknown
//
// An Uncertain outcome is resolved by readback, never by blindly sending
// again (DESIGN.md §1.4, §7): the reconciler calls Looker.Lookup (see the
// Lookup helper). A result means the operation happened and is the task's
// result; ErrNotFound means it credibly never happened, so re-queueing is
// safe; ErrNoReadback means nobody can tell, so the task is parked for a
// person — unless the provider honours idempotency keys, in which case a
// re-send cannot cause a second side effect (HonoursIdempotency).
//
// Every implementation declares its call timeout (CallTimer; the CallTimeout
// helper): the worker starts a call only when the Lambda invocation has that
// much time left plus its deadline margin, and bounds the call's context by
// it, so no call is cut short by the function's own timeout.
//
// # Implementations
//
//	simulated  internal/provider/simulated: deterministic, seeded, fault
//	           injection, idempotency ledger, readback (the default)
//	bedrock    internal/provider/bedrock: Amazon Bedrock Converse; no
//	           readback, no idempotency key
//	openai     internal/provider/openai: OpenAI-compatible chat completions;
//	           sends Idempotency-Key; no readback
//
// New builds one from a Config, usually read with ConfigFromEnv:
//
//	PROVIDER                     simulated (default) | bedrock | openai
//	PROVIDER_SEED                simulated: integer seed (default 0)
//	PROVIDER_FAULTS              simulated: fault rates, e.g. "throttle=0.1,server_error=0.05"
//	PROVIDER_SIMULATED_MODE      simulated: idempotent (default) | plain (no idempotency, no readback,
//	                             as Bedrock) | plain+readback (no idempotency, Lookup by operation id)
//	PROVIDER_MODEL               model id (required for bedrock and openai)
//	PROVIDER_BASE_URL            openai: API root (default https://api.openai.com/v1)
//	PROVIDER_API_KEY_ENV         openai: variable holding the key (default OPENAI_API_KEY)
//	PROVIDER_API_KEY_SECRET_ARN  openai: Secrets Manager secret holding the key (wins over the variable)
//	PROVIDER_TIMEOUT             per-call timeout, a Go duration or seconds (default 2m; simulated 1m)
//	GENERATION_EFFECT_CLASS      retry-safe (default: an uncertain generation is retried, its cost
//	                             charged) | effect (never repeated blind: read back or parked)
//
// ModelFromEnv reads only PROVIDER and PROVIDER_MODEL: what the submit
// function needs to check a task against the worker's provider without
// building it or reading a key — Config.ModelID (the model admission and
// prices are keyed by; simulated-1 for the simulated default) and
// Config.AcceptsDocuments (each adapter's AcceptsDocuments constant; false
// for openai, which refuses a request with documents).
//
// The types, errors and ParseGenerateInput are defined in
// internal/provider/contract (a leaf package, so that the adapters can use
// them while this package builds the adapters) and re-exported here as
// aliases; callers need only this package.
//
// # Privacy
//
// Nothing in these packages logs. Errors and String methods carry ids,
// hashes, sizes, codes and short provider messages, never a prompt, a
// generated text or a credential.
package provider
