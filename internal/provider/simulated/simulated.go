package simulated

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Model is the model id reported in outputs (contract.Modeler).
func (p *Provider) Model() string { return p.opts.Model }

// Name is the provider's name.
const Name = "simulated"

// Defaults for Options.
const (
	DefaultModel              = "simulated-1"
	DefaultThrottleRetryAfter = 2 * time.Second
	// DefaultCallTimeout is the simulated call timeout when
	// Options.CallTimeout is 0.
	DefaultCallTimeout = time.Minute
	// DefaultSlowDelay outlives the worker's default 30 s lease (so the
	// heartbeat must keep the claim) and fits DefaultCallTimeout (so a slow
	// call still succeeds).
	DefaultSlowDelay = 45 * time.Second
	DefaultLongDelay = time.Second
	// DefaultOversizeBytes is the output size of the Oversized fault: more
	// than DynamoDB's 400 KB item limit.
	DefaultOversizeBytes = 420 * 1024
	// DefaultOutputWords is the length of a reply when the input sets no
	// max_tokens (one word counts as one token).
	DefaultOutputWords = 24
)

// Options configure a Provider. The zero value is a fast, fault-free,
// idempotent provider with seed 0.
type Options struct {
	// Seed makes the output text, references and rate-drawn faults
	// reproducible.
	Seed int64
	// Latency is added to every call; Jitter adds a further uniform delay in
	// [0, Jitter) drawn from (seed, operation id, attempt).
	Latency time.Duration
	Jitter  time.Duration
	// Faults are drawn per call with these rates.
	Faults FaultPlan
	// Clock stamps ledger records; time.Now if nil.
	Clock func() time.Time
	// ThrottleRetryAfter is the Retry-After of the Throttle fault;
	// DefaultThrottleRetryAfter if 0.
	ThrottleRetryAfter time.Duration
	// SlowDelay is how long a Slow call takes; DefaultSlowDelay if 0.
	SlowDelay time.Duration
	// CallTimeout bounds one Generate call, which returns
	// retrypolicy.Uncertain when it runs out (the request was "sent");
	// DefaultCallTimeout if 0. It is declared to the worker (CallTimeout).
	CallTimeout time.Duration
	// LongDelay is how long a Long call takes; DefaultLongDelay if 0.
	LongDelay time.Duration
	// OversizeBytes is the least output size of an Oversized call;
	// DefaultOversizeBytes if 0.
	OversizeBytes int
	// Model is reported in the output; DefaultModel if empty.
	Model string
	// NoIdempotency makes every generation a new side effect, as with a
	// provider that ignores idempotency keys.
	NoIdempotency bool
	// NoReadback makes Lookup answer contract.ErrNoReadback.
	NoReadback bool
	// StreamChunkDelay is the pause before each chunk (a word) of a
	// streamed reply (GenerateStream); 0 streams without pauses.
	StreamChunkDelay time.Duration
	// StreamGate, if set, is asked before each chunk of a streamed reply
	// (after StreamChunkDelay) with the call's input and the chunk's
	// index from 0; the chunk is passed once it returns nil. An error cuts
	// the stream as a cancelled call does. It lets a test hold a reply at a
	// chosen word for as long as it needs, where a pause would only make
	// holding likely.
	StreamGate StreamGate
}

// StreamGate decides when chunk (from 0) of a streamed reply to in may be
// passed (Options.StreamGate): it returns nil then, or an error (ctx's,
// when ctx ends first).
type StreamGate func(ctx context.Context, in contract.GenerateInput, chunk int) error

// Record is what the ledger knows about one operation.
type Record struct {
	// Result is the first generation's result; zero if none happened.
	Result contract.Result
	// SideEffects counts the generations performed.
	SideEffects int
	// Calls counts the Generate calls that reached the provider.
	Calls int
	// FirstAt is when the first generation happened (Options.Clock).
	FirstAt time.Time
}

type entry struct {
	Record
	done    bool
	script  []Fault
	results []contract.Result
	events  []Event
}

// EventKind says what an Event records.
type EventKind string

// Event kinds.
const (
	EventCall   EventKind = "call"   // a Generate call that reached the provider (its start)
	EventLookup EventKind = "lookup" // a Lookup that reached the provider
)

// Outcome is how a call or a lookup ended, as the provider knows it.
type Outcome string

// Outcomes of a call: performed with its reply delivered, performed with
// its reply lost, interrupted by the caller's context while in flight
// (nothing performed, but the caller cannot know that), rejected with a
// definite error (nothing performed, and the caller knows it), or still in
// flight. Outcomes of a lookup: found, not found, no readback.
const (
	OutcomeInFlight    Outcome = ""
	OutcomePerformed   Outcome = "performed"
	OutcomeLostReply   Outcome = "lost_reply"
	OutcomeInterrupted Outcome = "interrupted"
	OutcomeRejected    Outcome = "rejected"
	OutcomeFound       Outcome = "found"
	OutcomeNotFound    Outcome = "not_found"
	OutcomeNoReadback  Outcome = "no_readback"
)

// Uncertain reports whether a caller that saw this call outcome cannot know
// whether the provider acted: anything but a definite rejection. (A reply
// that was delivered is certain for the caller that got it, but a caller
// that died holding it leaves its successor uncertain; the ledger cannot
// tell the two apart, so neither may be re-sent blindly.)
func (o Outcome) Uncertain() bool { return o != OutcomeRejected }

// Event is one call or lookup of an operation, in the order they started.
type Event struct {
	Kind    EventKind
	Start   time.Time // Options.Clock
	End     time.Time // zero while in flight
	Attempt int
	Fault   Fault
	Outcome Outcome
}

// Provider is the simulated provider. It is safe for concurrent use.
type Provider struct {
	opts Options

	mu     sync.Mutex
	ops    map[string]*entry
	total  int
	onWait func() // test hook: called when a call starts waiting
}

// New returns a simulated provider.
func New(opts Options) *Provider {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.ThrottleRetryAfter <= 0 {
		opts.ThrottleRetryAfter = DefaultThrottleRetryAfter
	}
	if opts.SlowDelay <= 0 {
		opts.SlowDelay = DefaultSlowDelay
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.Model == "" {
		opts.Model = DefaultModel
	}
	if opts.LongDelay <= 0 {
		opts.LongDelay = DefaultLongDelay
	}
	if opts.OversizeBytes <= 0 {
		opts.OversizeBytes = DefaultOversizeBytes
	}
	return &Provider{opts: opts, ops: map[string]*entry{}}
}

// CallTimeout is Options.CallTimeout: contract.CallTimer.
func (p *Provider) CallTimeout() time.Duration { return p.opts.CallTimeout }

// Name returns "simulated".
func (p *Provider) Name() string { return Name }

// HonoursIdempotencyKey reports true unless Options.NoIdempotency is set.
func (p *Provider) HonoursIdempotencyKey() bool { return !p.opts.NoIdempotency }

// OffersReadback reports true unless Options.NoReadback is set
// (contract.ReadbackOffering).
func (p *Provider) OffersReadback() bool { return !p.opts.NoReadback }

// String describes the configuration (seed, model, plan, switches).
func (p *Provider) String() string {
	return fmt.Sprintf("simulated(seed=%d model=%s faults=%q idempotent=%t readback=%t)",
		p.opts.Seed, p.opts.Model, p.opts.Faults.String(), !p.opts.NoIdempotency, !p.opts.NoReadback)
}

// Script queues faults for an operation: each later Generate with this
// operation id consumes the next one, and calls after the script is used up
// have no scripted fault. A script takes precedence over the input's
// "simulate" field and the fault rates.
func (p *Provider) Script(operationID string, faults ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entryLocked(operationID)
	e.script = append(e.script, faults...)
}

// SideEffects returns the number of generations performed for an operation.
func (p *Provider) SideEffects(operationID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.ops[operationID]; e != nil {
		return e.SideEffects
	}
	return 0
}

// TotalSideEffects returns the number of generations performed for all
// operations.
func (p *Provider) TotalSideEffects() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// Calls returns the number of Generate calls for an operation that reached
// the provider (a call rejected for its input or a context already done does
// not).
func (p *Provider) Calls(operationID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.ops[operationID]; e != nil {
		return e.Calls
	}
	return 0
}

// Snapshot returns the side effects per operation id, for every operation
// the provider has been called for.
func (p *Provider) Snapshot() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.ops))
	for id, e := range p.ops {
		if e.Calls > 0 || e.SideEffects > 0 {
			out[id] = e.SideEffects
		}
	}
	return out
}

// Starts returns the number of Generate calls for an operation that reached
// the provider (the same as Calls).
func (p *Provider) Starts(operationID string) int { return p.Calls(operationID) }

// Results returns every generation's result for an operation, oldest
// first (one at most when the provider honours idempotency keys).
func (p *Provider) Results(operationID string) []contract.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.ops[operationID]; e != nil {
		return append([]contract.Result(nil), e.results...)
	}
	return nil
}

// Events returns the calls and lookups of an operation that reached the
// provider, in the order they started.
func (p *Provider) Events(operationID string) []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.ops[operationID]; e != nil {
		return append([]Event(nil), e.events...)
	}
	return nil
}

// Record returns the ledger's record of an operation.
func (p *Provider) Record(operationID string) (Record, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.ops[operationID]
	if e == nil || (e.Calls == 0 && e.SideEffects == 0) {
		return Record{}, false
	}
	return e.Record, true
}

// Lookup returns the recorded result of the operation, contract.ErrNotFound
// if no generation happened for it, or contract.ErrNoReadback with
// Options.NoReadback.
func (p *Provider) Lookup(ctx context.Context, operationID string) (contract.Result, error) {
	if err := ctx.Err(); err != nil {
		return contract.Result{}, retrypolicy.Retryable(fmt.Errorf("simulated: lookup: %w: %w", retrypolicy.ErrRequestNotSent, err))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entryLocked(operationID)
	now := p.opts.Clock()
	ev := Event{Kind: EventLookup, Start: now, End: now}
	switch {
	case p.opts.NoReadback:
		ev.Outcome = OutcomeNoReadback
		e.events = append(e.events, ev)
		return contract.Result{}, contract.ErrNoReadback
	case e.done:
		ev.Outcome = OutcomeFound
		e.events = append(e.events, ev)
		return e.Result, nil
	}
	ev.Outcome = OutcomeNotFound
	e.events = append(e.events, ev)
	return contract.Result{}, contract.ErrNotFound
}

// Generate performs req, subject to the fault injection described in the
// package documentation.
func (p *Provider) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	return p.GenerateStream(ctx, req, nil)
}

// GenerateStream performs req like Generate (contract.Streamer) and, once
// the generation is performed, passes its text to onDelta a word at a
// time, Options.StreamChunkDelay before each. A call cut while streaming
// was performed: it returns retrypolicy.Uncertain (its outcome is
// lost_reply). The fault AcceptLoseReply streams the text, then loses the
// reply. A nil onDelta streams nothing (Generate).
func (p *Provider) GenerateStream(ctx context.Context, req contract.Request, onDelta contract.DeltaFunc) (contract.Result, error) {
	if err := ctx.Err(); err != nil {
		return contract.Result{}, retrypolicy.Retryable(fmt.Errorf("simulated: %w: %w", retrypolicy.ErrRequestNotSent, err))
	}
	if req.OperationID == "" {
		return contract.Result{}, retrypolicy.Permanent(errors.New("simulated: request has no operation id"))
	}
	in, err := contract.GenerateInputOf(req)
	if err != nil {
		return contract.Result{}, err
	}

	p.mu.Lock()
	e := p.entryLocked(req.OperationID)
	e.Calls++
	call := e.Calls
	var scripted Fault
	if len(e.script) > 0 {
		scripted, e.script = e.script[0], e.script[1:]
	}
	onWait := p.onWait
	attempt := req.Attempt
	if attempt <= 0 {
		attempt = call
	}
	fault := p.choose(req.OperationID, attempt, scripted, Fault(in.Simulate))
	ev := len(e.events)
	e.events = append(e.events, Event{Kind: EventCall, Start: p.opts.Clock(), Attempt: attempt, Fault: fault})
	p.mu.Unlock()
	res, outcome, err := p.generate(ctx, req, in, attempt, fault, onWait, onDelta)
	p.mu.Lock()
	e.events[ev].End, e.events[ev].Outcome = p.opts.Clock(), outcome
	p.mu.Unlock()
	return res, err
}

// generate performs one call that reached the provider and says how it
// ended.
func (p *Provider) generate(ctx context.Context, req contract.Request, in contract.GenerateInput, attempt int, fault Fault, onWait func(), onDelta contract.DeltaFunc) (contract.Result, Outcome, error) {
	delay := p.opts.Latency
	if p.opts.Jitter > 0 {
		delay += time.Duration(p.draw(req.OperationID, attempt, "jitter") * float64(p.opts.Jitter))
	}
	switch fault {
	case Slow:
		delay += p.opts.SlowDelay
	case Long:
		delay += p.opts.LongDelay
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	if err := wait(ctx, delay, onWait); err != nil {
		// The request is "with the provider": a real client cannot tell
		// whether it was performed. Nothing is recorded, so Lookup will
		// credibly say ErrNotFound.
		return contract.Result{}, OutcomeInterrupted, retrypolicy.Uncertain(fmt.Errorf("simulated: call for operation %s interrupted after it was sent: %w", req.OperationID, err))
	}

	fe := &FaultError{Fault: fault, OperationID: req.OperationID}
	switch fault {
	case Throttle:
		ra := p.opts.ThrottleRetryAfter
		fe.Status = &retrypolicy.StatusError{StatusCode: 429, RetryAfter: ra, Body: "simulated throttling"}
		return contract.Result{}, OutcomeRejected, retrypolicy.Throttled(fe, ra)
	case ServerError:
		fe.Status = &retrypolicy.StatusError{StatusCode: 503, Body: "simulated server error"}
		return contract.Result{}, OutcomeRejected, retrypolicy.Retryable(fe)
	case BadRequest:
		fe.Status = &retrypolicy.StatusError{StatusCode: 400, Body: "simulated bad request"}
		return contract.Result{}, OutcomeRejected, retrypolicy.Permanent(fe)
	case Credentials:
		fe.Status = &retrypolicy.StatusError{StatusCode: 401, Body: "simulated invalid credentials"}
		return contract.Result{}, OutcomeRejected, retrypolicy.Misconfigured(fe)
	}

	res := p.perform(req.OperationID, in, documentNote(req.Documents), fault == Oversized)
	if onDelta != nil {
		if err := p.stream(ctx, in, res, onDelta); err != nil {
			return contract.Result{}, OutcomeLostReply, retrypolicy.Uncertain(fmt.Errorf("simulated: stream for operation %s cut after the generation was performed: %w", req.OperationID, err))
		}
	}
	if fault == AcceptLoseReply {
		return contract.Result{}, OutcomeLostReply, retrypolicy.Uncertain(fe)
	}
	return res, OutcomePerformed, nil
}

// stream passes res's text to onDelta a word (with the space before it) at
// a time, StreamChunkDelay before each and then StreamGate's consent.
func (p *Provider) stream(ctx context.Context, in contract.GenerateInput, res contract.Result, onDelta contract.DeltaFunc) error {
	var out contract.GenerateOutput
	if err := json.Unmarshal(res.Output, &out); err != nil {
		return err
	}
	for i, chunk := range Chunks(out.Text) {
		if err := wait(ctx, p.opts.StreamChunkDelay, nil); err != nil {
			return err
		}
		if p.opts.StreamGate != nil {
			if err := p.opts.StreamGate(ctx, in, i); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		onDelta(chunk)
	}
	return nil
}

// Chunks splits text into the pieces GenerateStream passes: each word with
// the spaces before it. Their concatenation is text.
func Chunks(text string) []string {
	var out []string
	start := 0
	for i := 1; i < len(text); i++ {
		if text[i] == ' ' && text[i-1] != ' ' {
			out = append(out, text[start:i])
			start = i
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// choose applies the precedence script > simulate field > rates.
func (p *Provider) choose(opID string, attempt int, scripted, simulate Fault) Fault {
	if scripted != "" {
		return scripted
	}
	if simulate != "" && (simulate.Permanent() || attempt <= 1) {
		return simulate
	}
	if len(p.opts.Faults.Rates) > 0 {
		return p.opts.Faults.pick(p.draw(opID, attempt, "fault"))
	}
	return ""
}

// perform records one generation, or returns the recorded one when the
// provider honours idempotency. The ledger check and the write are one
// critical section, so concurrent duplicates cause one side effect.
func (p *Provider) perform(opID string, in contract.GenerateInput, docNote string, oversized bool) contract.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entryLocked(opID)
	if e.done && !p.opts.NoIdempotency {
		return e.Result
	}
	e.SideEffects++
	p.total++
	minBytes := 0
	if oversized {
		minBytes = p.opts.OversizeBytes
	}
	res := p.render(opID, in, docNote, e.SideEffects, minBytes)
	e.results = append(e.results, res)
	if !e.done {
		e.done = true
		e.Result = res
		e.FirstAt = p.opts.Clock()
	}
	return res
}

func (p *Provider) entryLocked(opID string) *entry {
	e := p.ops[opID]
	if e == nil {
		e = &entry{}
		p.ops[opID] = e
	}
	return e
}

// draw returns a uniform number in [0, 1) determined by the seed, the
// operation, the attempt and a purpose label.
func (p *Provider) draw(opID string, attempt int, purpose string) float64 {
	h := sha256.New()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(p.opts.Seed))
	binary.BigEndian.PutUint64(b[8:], uint64(attempt))
	h.Write(b[:])
	h.Write([]byte(purpose + "\x00" + opID))
	sum := h.Sum(nil)
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

var vocabulary = strings.Fields(`ledger lease fence queue task result receipt review
attempt budget backoff jitter retry token model prompt answer record durable
idempotent reconcile heartbeat shard partition message visibility outcome
provider readback operator summary careful exactly once simulated`)

// render builds the deterministic output of one generation.
// With minBytes > 0 the text goes on until it is at least that long;
// docNote (documents.go) follows the reply's prefix.
func (p *Provider) render(opID string, in contract.GenerateInput, docNote string, ordinal, minBytes int) contract.Result {
	promptSum := sha256.Sum256([]byte(in.System + "\x00" + in.Prompt + conversationText(in)))
	promptHash := hex.EncodeToString(promptSum[:4])

	h := sha256.New()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(p.opts.Seed))
	binary.BigEndian.PutUint64(b[8:], uint64(ordinal))
	h.Write(b[:])
	h.Write(promptSum[:])
	h.Write([]byte(opID))
	sum := h.Sum(nil)
	rng := rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])))

	words, stop := DefaultOutputWords, "end_turn"
	if in.MaxTokens > 0 && in.MaxTokens < words {
		words, stop = in.MaxTokens, "max_tokens"
	}
	var text strings.Builder
	text.WriteString("[simulated reply to prompt sha256:" + promptHash + "]")
	text.WriteString(conversationNote(in)) // conversation.go
	text.WriteString(docNote)
	for range words {
		text.WriteByte(' ')
		text.WriteString(vocabulary[rng.IntN(len(vocabulary))])
	}
	for text.Len() < minBytes {
		text.WriteByte(' ')
		text.WriteString(vocabulary[rng.IntN(len(vocabulary))])
		words++
	}
	out := contract.GenerateOutput{
		Text:       text.String(),
		Model:      p.opts.Model,
		StopReason: stop,
		Usage: contract.Usage{
			InputTokens:  len(strings.Fields(in.System)) + len(strings.Fields(in.Prompt)) + conversationWords(in),
			OutputTokens: words,
		},
	}
	raw, err := out.Marshal()
	if err != nil {
		panic("simulated: marshal output: " + err.Error()) // plain strings and ints cannot fail
	}
	return contract.Result{
		Output:      raw,
		Provider:    Name,
		ProviderRef: "sim-" + hex.EncodeToString(sum[16:24]) + "-" + strconv.Itoa(ordinal),
		Usage:       &out.Usage,
	}
}

// wait sleeps for d, returning the context's error if it ends first.
func wait(ctx context.Context, d time.Duration, onWait func()) error {
	if d <= 0 {
		return nil
	}
	if onWait != nil {
		onWait()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
