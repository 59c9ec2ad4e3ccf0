package contract

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// KindGenerate is the only task kind providers perform today: one LLM
// generation from a [GenerateInput].
const KindGenerate = "generate"

// Request is one attempt at a provider operation.
type Request struct {
	// OperationID is the stable idempotency key of the operation: the task
	// id. Every attempt of a task carries the same OperationID.
	OperationID string
	// Attempt is the attempt number (1-based), for tracing only; it is never
	// part of the idempotency key.
	Attempt int
	// Kind is the task kind; "" is read as [KindGenerate].
	Kind string
	// Input is the task input object; for KindGenerate, a [GenerateInput].
	Input json.RawMessage
	// CorrelationID is the caller's correlation id, for tracing.
	CorrelationID string
	// Documents are the uploaded documents a generate task references,
	// read from the payload store and verified (size and SHA-256) by the
	// worker before the call. A provider that cannot take them must refuse
	// the request (permanently), never drop them silently.
	Documents []Document
}

// Document is one uploaded document of a Request.
type Document struct {
	// Name is a neutral name for the model ("document-1", ...): never the
	// caller's file name (Bedrock warns names can carry prompt injections).
	Name string
	// Format is the short format name: pdf, txt, md, html, csv, docx
	// (documents) or png, jpeg (images).
	Format string
	// ContentType is the declared Content-Type.
	ContentType string
	// SHA256 is the lowercase hex SHA-256 of Bytes, as verified.
	SHA256 string
	// Bytes are the document's exact bytes.
	Bytes []byte
}

// IsImage reports whether d is an image (png, jpeg) rather than a document.
func (d Document) IsImage() bool { return d.Format == "png" || d.Format == "jpeg" }

// Result is what a successful operation produced.
type Result struct {
	// Output is the JSON object saved as the task result; for KindGenerate a
	// [GenerateOutput].
	Output json.RawMessage
	// Provider is the provider's name (Provider.Name).
	Provider string
	// ProviderRef is the provider's id for the call (a response id or a
	// request id), for receipts and support cases.
	ProviderRef string
	// Usage is the token usage the provider reported for the call; nil when
	// it reported none (spend accounting then charges the call's full
	// reservation).
	Usage *Usage
}

// Modeler is optionally implemented by a Provider that calls one
// configured model: spend accounting prices a call by it before the call.
type Modeler interface {
	// Model is the model id calls are made with (the price table's key).
	Model() string
}

// Provider performs the expensive, non-deterministic, side-effecting step of
// a task.
type Provider interface {
	// Name is a short stable name, e.g. "simulated", "bedrock", "openai".
	Name() string
	// Generate performs req. Its errors are steered with the constructors of
	// pkg/retrypolicy: Retryable/Throttled (transient), Permanent (the input
	// is at fault), Misconfigured (credentials, permissions, model: park) and
	// Uncertain (the outcome is unknown: the provider may have performed it).
	Generate(ctx context.Context, req Request) (Result, error)
}

// Looker is the optional readback a reconciler uses to resolve a task whose
// outcome is unknown.
type Looker interface {
	// Lookup returns the result of an earlier Generate with this operation
	// id. It returns ErrNotFound when the operation credibly never happened
	// (safe to re-send), ErrNoReadback when the provider cannot tell, and
	// any other error (steered like Generate's) when the lookup itself failed.
	Lookup(ctx context.Context, operationID string) (Result, error)
}

// ReadbackOffering is optionally implemented by a Looker whose Lookup may
// be unable to tell anything (it always answers ErrNoReadback).
type ReadbackOffering interface {
	// OffersReadback reports whether Lookup can answer other than
	// ErrNoReadback.
	OffersReadback() bool
}

// OffersReadback reports whether p can read an operation back: p is a
// Looker and, when it says (ReadbackOffering), its Lookup can answer other
// than ErrNoReadback. A Looker that does not say is taken at its word.
func OffersReadback(p Provider) bool {
	if _, ok := p.(Looker); !ok || p == nil {
		return false
	}
	if ro, ok := p.(ReadbackOffering); ok {
		return ro.OffersReadback()
	}
	return true
}

// CallTimer is optionally implemented by a Provider that bounds its calls.
type CallTimer interface {
	// CallTimeout is the longest one Generate call may take (0: no bound
	// declared). The worker starts a call only when the invocation has at
	// least this much time left (plus its deadline margin), and enforces it
	// on the call's context.
	CallTimeout() time.Duration
}

// IdempotencyHonouring is optionally implemented by a Provider.
type IdempotencyHonouring interface {
	// HonoursIdempotencyKey reports whether the provider deduplicates by
	// Request.OperationID, so that re-sending after an uncertain outcome
	// cannot cause a second side effect.
	HonoursIdempotencyKey() bool
}

var (
	// ErrNotFound means the provider credibly never performed the operation:
	// re-sending it is safe.
	ErrNotFound = errors.New("provider: operation not found")
	// ErrNoReadback means the provider cannot tell whether the operation
	// happened.
	ErrNoReadback = errors.New("provider: no readback")
)

// GenerateOutput is the shape of Result.Output for KindGenerate, the same for
// every provider.
type GenerateOutput struct {
	// Text is the generated text.
	Text string `json:"text"`
	// Model is the model that produced Text.
	Model string `json:"model"`
	// StopReason is the provider's reason for stopping, e.g. "end_turn",
	// "stop", "max_tokens".
	StopReason string `json:"stop_reason,omitempty"`
	// Usage counts tokens.
	Usage Usage `json:"usage"`
}

// Usage counts the tokens of one generation.
type Usage struct {
	// InputTokens is the number of prompt tokens.
	InputTokens int `json:"input_tokens"`
	// OutputTokens is the number of generated tokens.
	OutputTokens int `json:"output_tokens"`
}

// Marshal encodes o as a Result.Output.
func (o GenerateOutput) Marshal() (json.RawMessage, error) {
	return json.Marshal(o)
}

// DeltaFunc receives a streamed generation's text in order, one piece at
// a time, as the provider produces it. It is called from the goroutine
// that runs the call and must not block for long: a slow sink slows the
// call.
type DeltaFunc func(delta string)

// Streamer is optionally implemented by a Provider that can stream a
// generation as it is produced.
type Streamer interface {
	// GenerateStream performs req like Generate, passing the generated
	// text to onDelta as it arrives. It returns what Generate returns
	// (the same errors, steered the same way) and, on success, a Result
	// whose GenerateOutput.Text equals the concatenation of every delta
	// it passed. Deltas passed before an error are not a result: only the
	// returned Result is.
	GenerateStream(ctx context.Context, req Request, onDelta DeltaFunc) (Result, error)
}
