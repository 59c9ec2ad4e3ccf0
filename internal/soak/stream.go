package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/stream"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Streamed tasks in the soak (docs/streaming.md): the worker
// streams the generation of the stream kinds' tasks through
// stream.Fanout — the code the worker runs deployed — to a client
// subscribed right after the 202. The connections table and the
// @connections API are in memory (streamHub): every frame each connection
// receives is kept in order for the checker. Only these kinds stream; the
// others' calls are the plain Generate they always were.
const (
	StreamOK      Kind = "stream"         // a subscriber follows the reply to its done frame
	StreamDropped Kind = "stream_dropped" // the connection is gone after its first frame; the client reconnects and subscribes again
	StreamKilled  Kind = "stream_killed"  // the worker dies after the streamed call, before the save: no done frame for that attempt
	StreamRetried Kind = "stream_retried" // attempt 1 streams part of a reply, then fails (a 503): attempt 2 streams afresh
)

func streamKinds() []Kind { return []Kind{StreamOK, StreamDropped, StreamKilled, StreamRetried} }

// expectedStream are the final states of a stream kind's task (nil for
// other kinds). A worker killed after its call leaves an attempt whose
// outcome the plain modes cannot read back: parked unknown_outcome, as
// kill_after_provider.
func expectedStream(k Kind) []ledger.State {
	switch {
	case k == StreamKilled:
		return []ledger.State{ledger.StateCompleted, ledger.StateNeedsReview}
	case isStream(k):
		return []ledger.State{ledger.StateCompleted}
	}
	return nil
}

func isStream(k Kind) bool {
	switch k {
	case StreamOK, StreamDropped, StreamKilled, StreamRetried:
		return true
	}
	return false
}

// Stream timing: a word every streamChunkDelay (the simulated reply's 24
// words take about half a second), frames coalesced every streamFlush,
// subscribers looked for every streamPoll.
const (
	streamChunkDelay = 20 * time.Millisecond
	streamFlush      = 50 * time.Millisecond
	streamPoll       = 100 * time.Millisecond
)

// partialText is what attempt 1 of a stream_retried task streams before
// it fails.
const partialText = "[attempt 1: a partial reply the provider broke off]"

// streamHub is the connections table and the @connections API, in memory.
type streamHub struct {
	mu     sync.Mutex
	subs   map[string][]string // task → its subscribed connections
	task   map[string]string   // connection → its task
	frames map[string][]string // connection → the frames it received, in order
	conns  map[string][]string // task → every connection it ever had, in order
	// dropAfter: a connection answers 410 Gone once it received this many
	// frames, and its client reconnects (stream_dropped's first one).
	dropAfter map[string]int
	dropped   int // connections dropped
	// onFrame is told of every frame delivered, onDrop of every drop
	// (the injected counts).
	onFrame func(taskID string, data []byte)
	onDrop  func(taskID string)
}

func newStreamHub() *streamHub {
	return &streamHub{subs: map[string][]string{}, task: map[string]string{}, frames: map[string][]string{}, conns: map[string][]string{}, dropAfter: map[string]int{}}
}

// subscribe opens connection n of taskID and subscribes it.
func (h *streamHub) subscribe(taskID string, dropAfter int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := fmt.Sprintf("c-%s-%d", taskID, len(h.conns[taskID])+1)
	h.subs[taskID] = append(h.subs[taskID], id)
	h.task[id] = taskID
	h.conns[taskID] = append(h.conns[taskID], id)
	if dropAfter > 0 {
		h.dropAfter[id] = dropAfter
	}
	return id
}

// Subscribers lists taskID's connections (stream.Subscriptions).
func (h *streamHub) Subscribers(_ context.Context, taskID string) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.subs[taskID]...), nil
}

// Unsubscribe deletes a subscription (stream.Subscriptions).
func (h *streamHub) Unsubscribe(_ context.Context, connectionID, taskID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := h.subs[taskID][:0]
	for _, c := range h.subs[taskID] {
		if c != connectionID {
			subs = append(subs, c)
		}
	}
	h.subs[taskID] = subs
	return nil
}

// PostToConnection delivers a frame (stream.Poster). A connection past its
// dropAfter is gone; its client reconnects at once.
func (h *streamHub) PostToConnection(_ context.Context, connectionID string, data []byte) error {
	h.mu.Lock()
	n, drop := h.dropAfter[connectionID]
	if drop && len(h.frames[connectionID]) >= n {
		delete(h.dropAfter, connectionID)
		h.dropped++
		task := h.task[connectionID]
		h.mu.Unlock()
		h.subscribe(task, 0) // the client reconnects and subscribes again
		if h.onDrop != nil {
			h.onDrop(task)
		}
		return stream.ErrGone
	}
	h.frames[connectionID] = append(h.frames[connectionID], string(data))
	task := h.task[connectionID]
	h.mu.Unlock()
	if h.onFrame != nil {
		h.onFrame(task, data)
	}
	return nil
}

// received returns the connections of taskID and the frames each got.
func (h *streamHub) received(taskID string) (conns []string, frames map[string][]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	frames = map[string][]string{}
	for _, c := range h.conns[taskID] {
		frames[c] = append([]string(nil), h.frames[c]...)
	}
	return append([]string(nil), h.conns[taskID]...), frames
}

// wireStreams gives the worker its Fanout, for the stream kinds' tasks.
func (s *soak) wireStreams() {
	s.hub = newStreamHub()
	s.hub.onDrop = func(taskID string) {
		if t := s.byID[taskID]; t != nil && s.once(StreamDropped, taskID) {
			s.inject(StreamDropped)
		}
	}
	s.hub.onFrame = func(taskID string, data []byte) {
		// A plain stream's "fault" is being streamed: counted at its first
		// done frame.
		if t := s.byID[taskID]; t != nil && t.kind == StreamOK && strings.Contains(string(data), `"done":true`) && s.once(StreamOK, taskID) {
			s.inject(StreamOK)
		}
	}
	f := &stream.Fanout{Subs: s.hub, Poster: s.hub, Poll: streamPoll, Flush: streamFlush, Log: s.log}
	s.work.Streams = worker.StreamsFunc(func(ctx context.Context, taskID string, attempt int) worker.StreamAttempt {
		if t := s.byID[taskID]; t != nil && isStream(t.kind) {
			return f.Begin(ctx, taskID, attempt)
		}
		return nil // not streamed: the call is a plain Generate
	})
}

// subscribeStream is the client of a stream kind's task: it subscribes
// right after the 202.
func (s *soak) subscribeStream(t *task) {
	drop := 0
	if t.kind == StreamDropped {
		drop = 1
	}
	s.hub.subscribe(t.id, drop)
}

// GenerateStream is Generate, streamed: the same accounting, the
// provider's GenerateStream. The first call of a stream_retried task
// streams partialText and then fails with a 503 (the provider broke off:
// a definite failure, retried), without reaching the provider.
func (p *countingProvider) GenerateStream(ctx context.Context, req contract.Request, onDelta contract.DeltaFunc) (contract.Result, error) {
	if t := p.s.byID[req.OperationID]; t != nil && t.kind == StreamRetried && p.s.once(StreamRetried, t.id) {
		for _, c := range []string{partialText[:10], partialText[10:30], partialText[30:]} {
			onDelta(c)
			time.Sleep(streamChunkDelay) // a provider's pace between chunks
		}
		p.s.inject(StreamRetried)
		p.s.mu.Lock()
		p.s.provCalls++
		p.s.mu.Unlock()
		return contract.Result{}, retrypolicy.Retryable(&retrypolicy.StatusError{StatusCode: 503, Body: "soak: the stream broke off"})
	}
	return p.generateWith(ctx, req, onDelta)
}

// frameOf is one received frame, delta or done.
type frameOf struct {
	Attempt      int    `json:"attempt"`
	Seq          int    `json:"seq"`
	Delta        string `json:"delta"`
	Done         bool   `json:"done"`
	State        string `json:"state"`
	ResultSHA256 string `json:"result_sha256"`
}

func parseFrame(raw string) (frameOf, error) {
	var f frameOf
	err := json.Unmarshal([]byte(raw), &f)
	return f, err
}
