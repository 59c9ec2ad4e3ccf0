package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Model is the configured model id (contract.Modeler).
func (p *Provider) Model() string { return p.model }

// Name is the provider's name.
const Name = "openai"

// Defaults for Options.
const (
	DefaultBaseURL = "https://api.openai.com/v1"
	DefaultTimeout = 2 * time.Minute
	// MaxResponseBytes bounds how much of a response body is read.
	MaxResponseBytes = 8 << 20
)

// Options configure a Provider.
type Options struct {
	// BaseURL is the API root, e.g. "https://api.openai.com/v1" (the
	// default); requests go to BaseURL + "/chat/completions".
	BaseURL string
	// Model is the model name sent with every request; required.
	Model string
	// Key supplies the API key; required (see EnvKey, SecretsManagerKey).
	Key KeySource
	// HTTPClient sends the requests; a client with a clone of
	// http.DefaultTransport if nil. Its Timeout should be 0: the per-call
	// Timeout below is applied through the context so that a timeout can be
	// told apart from a request that was never sent.
	HTTPClient *http.Client
	// Timeout bounds one call; DefaultTimeout if 0, none if negative.
	Timeout time.Duration
	// HonoursIdempotency declares that the server deduplicates by the
	// Idempotency-Key header (HonoursIdempotencyKey reports it). The header
	// is sent either way.
	HonoursIdempotency bool
	// Clock is used to read HTTP-date Retry-After headers; time.Now if nil.
	Clock func() time.Time
}

// Provider calls an OpenAI-compatible chat completions API. It is safe for
// concurrent use.
type Provider struct {
	endpoint string
	model    string
	key      KeySource
	client   *http.Client
	timeout  time.Duration
	idem     bool
	now      func() time.Time
}

// New validates opts and returns a Provider. It does not contact the server
// or read the key.
func New(opts Options) (*Provider, error) {
	if opts.Model == "" {
		return nil, retrypolicy.Misconfigured(errors.New("openai: no model configured"))
	}
	if opts.Key == nil {
		return nil, retrypolicy.Misconfigured(errors.New("openai: no API key source configured"))
	}
	base := strings.TrimRight(opts.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, retrypolicy.Misconfigured(errors.New("openai: base URL must be an absolute http(s) URL without credentials"))
	}
	p := &Provider{
		endpoint: base + "/chat/completions",
		model:    opts.Model,
		key:      opts.Key,
		client:   opts.HTTPClient,
		timeout:  opts.Timeout,
		idem:     opts.HonoursIdempotency,
		now:      opts.Clock,
	}
	if p.client == nil {
		p.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if p.timeout == 0 {
		p.timeout = DefaultTimeout
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p, nil
}

// CallTimeout is the bound of one chat completion call (0 when none is
// set): contract.CallTimer.
func (p *Provider) CallTimeout() time.Duration { return max(p.timeout, 0) }

// Name returns "openai".
func (p *Provider) Name() string { return Name }

// HonoursIdempotencyKey reports Options.HonoursIdempotency.
func (p *Provider) HonoursIdempotencyKey() bool { return p.idem }

// OffersReadback returns false (contract.ReadbackOffering): see Lookup.
func (p *Provider) OffersReadback() bool { return false }

// Lookup always returns contract.ErrNoReadback: chat completions cannot be
// read back by idempotency key.
func (p *Provider) Lookup(context.Context, string) (contract.Result, error) {
	return contract.Result{}, contract.ErrNoReadback
}

// String describes the provider without its key.
func (p *Provider) String() string {
	return fmt.Sprintf("openai(endpoint=%s model=%s key=%v idempotent=%t)", p.endpoint, p.model, p.key, p.idem)
}

// GoString is String, so %#v cannot print the fields.
func (p *Provider) GoString() string { return p.String() }

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []chatMessage  `json:"messages"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

type apiError struct {
	Error struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	} `json:"error"`
}

// Generate sends one chat completion with the header Idempotency-Key set to
// req.OperationID. Errors are steered:
//
//	429                         Throttled (Retry-After / retry-after-ms);
//	                            code insufficient_quota: Misconfigured
//	408, 409, 5xx (not 504/524) Retryable
//	504, 524 (gateway timeout)  Uncertain: the server may have generated
//	400 (context length, ...), other 4xx, finish_reason content_filter
//	                            Permanent
//	401, 403, 404 (model)       Misconfigured
//	failure before the request was written (dial, DNS, context)
//	                            Retryable wrapping retrypolicy.ErrRequestNotSent
//	failure after it was written (timeout, reset, unreadable 2xx body)
//	                            Uncertain
//
// A 401 with a key from a caching source (Invalidator) re-reads the key once
// and, if it changed, sends again: a 401 means the request was not processed.
func (p *Provider) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	return p.generate(ctx, req, nil)
}

// GenerateStream is Generate with "stream": true (contract.Streamer): the
// server's server-sent events pass each content delta to onDelta, and the
// result is their concatenation, with the usage of the last chunk
// (stream_options.include_usage). Errors are Generate's; in addition,
// anything that ends a 2xx stream before its finish_reason and [DONE]
// (a read failure, an error event, the body cut) is Uncertain: the server
// was generating.
func (p *Provider) GenerateStream(ctx context.Context, req contract.Request, onDelta contract.DeltaFunc) (contract.Result, error) {
	if onDelta == nil {
		onDelta = func(string) {}
	}
	return p.generate(ctx, req, onDelta)
}

func (p *Provider) generate(ctx context.Context, req contract.Request, onDelta contract.DeltaFunc) (contract.Result, error) {
	if req.OperationID == "" {
		return contract.Result{}, retrypolicy.Permanent(errors.New("openai: request has no operation id"))
	}
	if len(req.Documents) > 0 {
		return contract.Result{}, retrypolicy.Permanent(fmt.Errorf("%w (%d document(s)); use the bedrock provider for tasks with documents", ErrDocumentsUnsupported, len(req.Documents)))
	}
	in, err := contract.GenerateInputOf(req)
	if err != nil {
		return contract.Result{}, err
	}
	body := chatRequest{Model: p.model, MaxTokens: in.MaxTokens, Temperature: in.Temperature}
	body.Messages = chatMessages(in) // conversation.go
	if onDelta != nil {
		body.Stream, body.StreamOptions = true, &streamOptions{IncludeUsage: true}
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return contract.Result{}, retrypolicy.Permanent(fmt.Errorf("openai: encode request: %w", err))
	}

	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	key, err := p.key.APIKey(ctx)
	if err != nil {
		return contract.Result{}, err
	}
	res, status, err := p.send(ctx, req.OperationID, key, payload, in, onDelta)
	if status == http.StatusUnauthorized {
		if inv, ok := p.key.(Invalidator); ok {
			inv.Invalidate(key)
			if fresh, kerr := p.key.APIKey(ctx); kerr == nil && fresh != key {
				res, _, err = p.send(ctx, req.OperationID, fresh, payload, in, onDelta)
			}
		}
	}
	return res, err
}

// send performs one HTTP exchange and returns the result, the HTTP status (0
// if none arrived) and a steered error.
func (p *Provider) send(ctx context.Context, opID, key string, payload []byte, in contract.GenerateInput, onDelta contract.DeltaFunc) (contract.Result, int, error) {
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, p.endpoint, nil)
	if err != nil {
		return contract.Result{}, 0, retrypolicy.Misconfigured(fmt.Errorf("openai: build request: %w", err))
	}
	// No GetBody: net/http treats a POST with an Idempotency-Key header as
	// replayable and would silently re-send it after a connection failure.
	// Whether to re-send is the worker's decision, not the transport's.
	hreq.Body = io.NopCloser(bytes.NewReader(payload))
	hreq.ContentLength = int64(len(payload))
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if onDelta != nil {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	hreq.Header.Set("Authorization", "Bearer "+key)
	hreq.Header.Set("Idempotency-Key", opID)

	resp, err := p.client.Do(hreq)
	if err != nil {
		if wrote.Load() {
			return contract.Result{}, 0, retrypolicy.Uncertain(fmt.Errorf("openai: operation %s: request sent, no response: %w", opID, err))
		}
		return contract.Result{}, 0, retrypolicy.Retryable(fmt.Errorf("openai: operation %s: %w: %w", opID, retrypolicy.ErrRequestNotSent, err))
	}
	defer resp.Body.Close()
	if onDelta != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		res, err := p.readStream(opID, resp.Header.Get("X-Request-Id"), resp.Body, onDelta)
		return res, resp.StatusCode, err
	}
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if readErr == nil && len(raw) > MaxResponseBytes {
		readErr = fmt.Errorf("response body over %d bytes", MaxResponseBytes)
	}
	ref := resp.Header.Get("X-Request-Id")

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if readErr != nil {
			return contract.Result{}, resp.StatusCode, retrypolicy.Uncertain(fmt.Errorf("openai: operation %s (request id %s): reading the response: %w", opID, ref, readErr))
		}
		res, err := p.result(opID, ref, raw)
		return res, resp.StatusCode, err
	}
	return contract.Result{}, resp.StatusCode, p.statusError(opID, ref, key, resp, raw, in)
}

func (p *Provider) result(opID, ref string, raw []byte) (contract.Result, error) {
	var cr chatResponse
	if err := json.Unmarshal(raw, &cr); err != nil || len(cr.Choices) == 0 {
		// The server answered 2xx, so it generated; we cannot read what.
		return contract.Result{}, retrypolicy.Uncertain(fmt.Errorf("openai: operation %s (request id %s): 2xx response without a readable choice (%d bytes)", opID, ref, len(raw)))
	}
	choice := cr.Choices[0]
	if choice.FinishReason == "content_filter" {
		// The model ran (and billed): no refusal (retrypolicy.ErrActed).
		return contract.Result{}, retrypolicy.Permanent(fmt.Errorf("openai: operation %s: generation stopped by the content filter (finish_reason content_filter): %w", opID, retrypolicy.ErrActed))
	}
	text, ok := contentText(choice.Message.Content)
	if !ok {
		return contract.Result{}, retrypolicy.Uncertain(fmt.Errorf("openai: operation %s (request id %s): unreadable message content", opID, ref))
	}
	model := cr.Model
	if model == "" {
		model = p.model
	}
	usage := contract.Usage{InputTokens: cr.Usage.PromptTokens, OutputTokens: cr.Usage.CompletionTokens}
	out, err := contract.GenerateOutput{
		Text:       text,
		Model:      model,
		StopReason: choice.FinishReason,
		Usage:      usage,
	}.Marshal()
	if err != nil {
		return contract.Result{}, retrypolicy.Uncertain(fmt.Errorf("openai: operation %s: encode output: %w", opID, err))
	}
	if cr.ID != "" {
		ref = cr.ID
	}
	return contract.Result{Output: out, Provider: Name, ProviderRef: ref, Usage: &usage}, nil
}

// contentText reads a message content that is a string, null, or an array
// of parts ({"type":"text","text":...}).
func contentText(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, part := range parts {
		if part.Type == "text" || part.Type == "" {
			b.WriteString(part.Text)
		}
	}
	return b.String(), true
}

func (p *Provider) statusError(opID, ref, key string, resp *http.Response, raw []byte, in contract.GenerateInput) error {
	code := resp.StatusCode
	var ae apiError
	_ = json.Unmarshal(raw, &ae)
	errCode := strings.Trim(string(ae.Error.Code), `"`)
	if errCode == "null" {
		errCode = ""
	}
	se := &retrypolicy.StatusError{
		StatusCode: code,
		RetryAfter: p.retryAfter(resp.Header),
		Body:       summary(code, ae.Error.Type, errCode, ae.Error.Message, key, in),
	}
	err := fmt.Errorf("openai: operation %s (request id %s): %w", opID, ref, se)
	switch {
	case code == http.StatusTooManyRequests && errCode == "insufficient_quota":
		return retrypolicy.Misconfigured(err)
	case code == http.StatusTooManyRequests:
		return retrypolicy.Throttled(err, se.RetryAfter)
	case code == http.StatusUnauthorized, code == http.StatusForbidden, code == http.StatusNotFound:
		return retrypolicy.Misconfigured(err)
	case code == http.StatusGatewayTimeout, code == 524:
		// A gateway gave up waiting: the server behind it may have generated.
		return retrypolicy.Uncertain(err)
	case code == http.StatusRequestTimeout, code == http.StatusConflict, code >= 500:
		return retrypolicy.Retryable(err)
	default:
		// 400 (context_length_exceeded, content policy, bad parameter), 413, 422, ...
		return retrypolicy.Permanent(err)
	}
}

func (p *Provider) retryAfter(h http.Header) time.Duration {
	if ms := strings.TrimSpace(h.Get("Retry-After-Ms")); ms != "" {
		if f, err := strconv.ParseFloat(ms, 64); err == nil && f > 0 && f < float64(time.Hour/time.Millisecond) {
			return time.Duration(f * float64(time.Millisecond))
		}
	}
	return retrypolicy.ParseRetryAfter(h.Get("Retry-After"), p.now())
}

// maxMessage bounds the server's error message kept in an error.
const maxMessage = 200

// summary renders the server's error as "type/code: message" with the
// message dropped for authentication failures (servers echo key fragments
// there) or when it quotes the task text, the key redacted, and the length
// bounded.
func summary(status int, typ, code, msg, key string, in contract.GenerateInput) string {
	var parts []string
	for _, s := range []string{typ, code} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	head := strings.Join(parts, "/")
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		msg = ""
	}
	if msg != "" && quotesInput(msg, in) {
		msg = "[message withheld: it quotes the task input]"
	}
	if key != "" {
		msg = strings.ReplaceAll(msg, key, "[REDACTED]")
	}
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "…"
	}
	switch {
	case head == "":
		return msg
	case msg == "":
		return head
	}
	return head + ": " + msg
}

// quotes reports whether msg contains a recognisable piece of text.
func quotes(msg, text string) bool {
	text = strings.TrimSpace(text)
	if len(text) < 8 {
		return false
	}
	probe := text[:min(len(text), 32)]
	return strings.Contains(msg, probe)
}
