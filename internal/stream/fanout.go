package stream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Defaults of Fanout.
const (
	// DefaultPoll is how often a streaming attempt looks for new
	// subscribers (one Query of the connections table each time).
	DefaultPoll = time.Second
	// DefaultFlush is the least time between two frames to a connection:
	// chunks arriving faster are sent together.
	DefaultFlush = 100 * time.Millisecond
	// DefaultDoneWait bounds what Done adds to a record: the last frames
	// and the done frame are posted within it.
	DefaultDoneWait = 3 * time.Second
)

// Subscriptions is what a Fanout reads and prunes: *Table.
type Subscriptions interface {
	Subscribers(ctx context.Context, taskID string) ([]string, error)
	Unsubscribe(ctx context.Context, connectionID, taskID string) error
}

// Fanout streams attempts' text to the connections subscribed to their
// task. One Fanout serves every record of a worker instance.
type Fanout struct {
	Subs   Subscriptions
	Poster Poster
	// Poll, Flush and DoneWait: DefaultPoll, DefaultFlush, DefaultDoneWait
	// if 0.
	Poll, Flush, DoneWait time.Duration
	Log                   *slog.Logger
}

// Attempt is one attempt's stream. Delta never blocks the provider call
// on the network: it appends to the text kept in memory, and a goroutine
// posts. Done or Close must be called once the call is over.
type Attempt struct {
	f       *Fanout
	taskID  string
	attempt int

	mu    sync.Mutex
	text  strings.Builder
	conns map[string]*conn
	// dropped are connections this attempt no longer posts to: gone, or a
	// post whose outcome is unknown (the frame may have arrived: sending
	// its text again could duplicate or, coalesced, skip text).
	dropped map[string]bool
	wake    chan struct{}
	stop    chan struct{}
	exited  chan struct{}
}

// conn is what one subscriber has been sent: bytes of the text, and
// frames (the last frame's seq).
type conn struct {
	sent int
	seq  int
}

// Begin starts an attempt's stream; ctx bounds its posts and polls.
func (f *Fanout) Begin(ctx context.Context, taskID string, attempt int) *Attempt {
	a := &Attempt{f: f, taskID: taskID, attempt: attempt, conns: map[string]*conn{}, dropped: map[string]bool{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{})}
	// Not cancelled with ctx: halt lets a post in flight finish (each is
	// bounded by 5 s), since a post cut midway leaves its frame's delivery
	// unknown and the connection would lose the rest of the stream.
	go a.run(context.WithoutCancel(ctx))
	return a
}

func dflt(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Delta is a contract.DeltaFunc: it records a chunk of text.
func (a *Attempt) Delta(d string) {
	if d == "" {
		return
	}
	a.mu.Lock()
	a.text.WriteString(d)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// run posts what each subscriber has not had yet, looking for new
// subscribers every Poll, until stop.
func (a *Attempt) run(ctx context.Context) {
	defer close(a.exited)
	poll := dflt(a.f.Poll, DefaultPoll)
	flush := dflt(a.f.Flush, DefaultFlush)
	a.refresh(ctx)
	lastPoll := time.Now()
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-ticker.C:
		case <-a.wake:
		}
		if time.Since(lastPoll) >= poll {
			a.refresh(ctx)
			lastPoll = time.Now()
		}
		a.send(ctx)
		select { // coalesce the chunks of the next Flush
		case <-a.stop:
			return
		case <-time.After(flush):
		}
	}
}

// refresh adds the subscribers the table lists that are not known yet.
func (a *Attempt) refresh(ctx context.Context) {
	ids, err := a.f.Subs.Subscribers(ctx, a.taskID)
	if err != nil {
		a.log().WarnContext(ctx, "stream: listing subscribers failed", "task_id", a.taskID, "error", err.Error())
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		if _, ok := a.conns[id]; !ok && !a.dropped[id] {
			a.conns[id] = &conn{}
		}
	}
}

// MaxFrameText bounds the text of one frame: API Gateway bills WebSocket
// messages in 32 KB units and refuses a PostToConnection over 128 KB, so a
// long catch-up goes out as several frames.
const MaxFrameText = 30 << 10

// send posts to each subscriber the text it has not had (one frame, or
// several of at most MaxFrameText).
func (a *Attempt) send(ctx context.Context) {
	a.mu.Lock()
	text := a.text.String()
	type out struct {
		id string
		c  *conn
	}
	var outs []out
	for id, c := range a.conns {
		if c.sent < len(text) {
			outs = append(outs, out{id, c})
		}
	}
	a.mu.Unlock()
	for _, o := range outs {
		for o.c.sent < len(text) {
			end := cut(text, o.c.sent, MaxFrameText)
			b, _ := json.Marshal(DeltaFrame{TaskID: a.taskID, Attempt: a.attempt, Seq: o.c.seq + 1, Delta: text[o.c.sent:end]})
			if !a.post(ctx, o.id, b) {
				break
			}
			a.mu.Lock()
			o.c.sent, o.c.seq = end, o.c.seq+1
			a.mu.Unlock()
		}
	}
}

// cut returns the end of a piece of text starting at from, at most n bytes
// long and not splitting a UTF-8 sequence.
func cut(text string, from, n int) int {
	end := from + n
	if end >= len(text) {
		return len(text)
	}
	for end > from+1 && !utf8.RuneStart(text[end]) {
		end--
	}
	return end
}

// post sends one frame and reports whether it was delivered. A connection
// that is gone is forgotten (its subscription deleted); one whose post
// failed otherwise gets no more frames of this attempt (no done frame
// either): its client reads the task, whose saved result is the truth.
func (a *Attempt) post(ctx context.Context, id string, frame []byte) bool {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := a.f.Poster.PostToConnection(pctx, id, frame)
	if err == nil {
		return true
	}
	a.mu.Lock()
	delete(a.conns, id)
	a.dropped[id] = true
	a.mu.Unlock()
	if errors.Is(err, ErrGone) {
		if uerr := a.f.Subs.Unsubscribe(context.WithoutCancel(ctx), id, a.taskID); uerr != nil {
			a.log().WarnContext(ctx, "stream: forgetting a gone connection failed", "task_id", a.taskID, "error", uerr.Error())
		}
		return false
	}
	a.log().WarnContext(ctx, "stream: post to connection failed; no more frames of this attempt to it", "task_id", a.taskID, "attempt", a.attempt, "error", err.Error())
	return false
}

// halt stops the posting goroutine; it reports whether this call stopped
// it (false: the stream had ended already).
func (a *Attempt) halt() bool {
	a.mu.Lock()
	first := true
	select {
	case <-a.stop:
		first = false
	default:
		close(a.stop)
	}
	a.mu.Unlock()
	<-a.exited
	return first
}

// Close ends the stream without a done frame: the attempt saved nothing
// (it failed, was fenced, or its outcome is not known). After Done it does
// nothing.
func (a *Attempt) Close() { a.halt() }

// Done ends the stream of an attempt whose result was saved: one last
// look for subscribers (so one that came since the last poll still gets
// the whole text), the text each has not had, then the done frame. Call
// it only after the save succeeded. It returns within DoneWait. After Close
// it does nothing.
func (a *Attempt) Done(ctx context.Context, state, resultSHA256 string) {
	if !a.halt() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dflt(a.f.DoneWait, DefaultDoneWait))
	defer cancel()
	a.refresh(ctx)
	a.send(ctx)
	b, _ := json.Marshal(DoneFrame{TaskID: a.taskID, Attempt: a.attempt, Done: true, State: state, ResultSHA256: resultSHA256})
	a.mu.Lock()
	var ids []string
	textLen := a.text.Len()
	for id, c := range a.conns {
		if c.sent == textLen { // never a done frame after a gap
			ids = append(ids, id)
		}
	}
	a.mu.Unlock()
	for _, id := range ids {
		a.post(ctx, id, b)
	}
}

func (a *Attempt) log() *slog.Logger {
	if a.f.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.f.Log
}
