package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/taskledger/taskledger/internal/stream"
)

func TestParseSubscribeIsStrict(t *testing.T) {
	t.Parallel()
	if s, err := stream.ParseSubscribe([]byte(`{"action":"subscribe","task_id":"t_abc"}`)); err != nil || s.TaskID != "t_abc" {
		t.Fatalf("good message: %+v %v", s, err)
	}
	for _, bad := range []string{
		``, `[]`, `{"action":"subscribe"}`, `{"action":"unsubscribe","task_id":"t"}`,
		`{"action":"subscribe","task_id":"t","extra":1}`, `{"action":"subscribe","task_id":"t"} {}`,
		`{"action":"subscribe","task_id":"a b"}`, `{"action":"subscribe","task_id":"` + strings.Repeat("x", 129) + `"}`,
	} {
		if _, err := stream.ParseSubscribe([]byte(bad)); !errors.Is(err, stream.ErrBadMessage) {
			t.Errorf("%q: %v, want ErrBadMessage", bad, err)
		}
	}
}

func TestBearerFromProtocols(t *testing.T) {
	t.Parallel()
	if got := stream.BearerFromProtocols("taskledger.v1, bearer.aaa.bbb.ccc"); got != "aaa.bbb.ccc" {
		t.Fatalf("got %q", got)
	}
	if got := stream.BearerFromProtocols("taskledger.v1"); got != "" {
		t.Fatalf("got %q from no bearer protocol", got)
	}
}

// subs is a fixed subscriber list.
type subs struct {
	mu    sync.Mutex
	ids   []string
	unsub []string
}

func (s *subs) Subscribers(context.Context, string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...), nil
}

func (s *subs) Unsubscribe(_ context.Context, id, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsub = append(s.unsub, id)
	return nil
}

// blockingPoster holds every post until released; it answers gone for
// connection "gone".
type blockingPoster struct {
	release chan struct{}
	mu      sync.Mutex
	got     map[string][]string
}

func (p *blockingPoster) PostToConnection(ctx context.Context, id string, data []byte) error {
	select {
	case <-p.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if id == "gone" {
		return stream.ErrGone
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got[id] = append(p.got[id], string(data))
	return nil
}

// A stalled @connections endpoint never slows the provider call: Delta
// returns at once however long posts take, and the done frame still
// follows the whole text; a gone connection is forgotten.
func TestDeltaNeverWaitsForPosts(t *testing.T) {
	t.Parallel()
	s := &subs{ids: []string{"c1", "gone"}}
	p := &blockingPoster{release: make(chan struct{}), got: map[string][]string{}}
	f := &stream.Fanout{Subs: s, Poster: p, Poll: time.Millisecond, Flush: time.Millisecond}
	a := f.Begin(t.Context(), "t_1", 1)
	start := time.Now()
	for range 1000 {
		a.Delta("x")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("1000 deltas took %v with posts blocked", d)
	}
	close(p.release)
	a.Done(t.Context(), "completed", "abc")
	p.mu.Lock()
	defer p.mu.Unlock()
	var text strings.Builder
	frames := p.got["c1"]
	if len(frames) == 0 || !strings.Contains(frames[len(frames)-1], `"done":true`) {
		t.Fatalf("frames %v, want a done frame last", frames)
	}
	for _, fr := range frames[:len(frames)-1] {
		i := strings.Index(fr, `"delta":"`)
		text.WriteString(strings.TrimSuffix(fr[i+len(`"delta":"`):], `"}`))
	}
	if text.String() != strings.Repeat("x", 1000) {
		t.Fatalf("c1 got %d characters, want 1000", text.Len())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unsub) == 0 || s.unsub[0] != "gone" {
		t.Fatalf("unsubscribed %v, want the gone connection", s.unsub)
	}
}

// Close ends a stream without a done frame (nothing was saved).
func TestCloseSendsNoDoneFrame(t *testing.T) {
	t.Parallel()
	s := &subs{ids: []string{"c1"}}
	p := &blockingPoster{release: make(chan struct{}), got: map[string][]string{}}
	close(p.release)
	f := &stream.Fanout{Subs: s, Poster: p, Poll: time.Millisecond, Flush: time.Millisecond}
	a := f.Begin(t.Context(), "t_2", 1)
	a.Delta("partial")
	a.Close()
	a.Done(t.Context(), "completed", "abc") // after Close: nothing more
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, fr := range p.got["c1"] {
		if strings.Contains(fr, `"done"`) {
			t.Fatalf("a done frame after Close: %s", fr)
		}
	}
}

// A long text reaches a subscriber in frames numbered 1, 2, 3, … of at most
// MaxFrameText bytes each, never splitting a character.
func TestLongCatchUpIsSplitIntoNumberedFrames(t *testing.T) {
	t.Parallel()
	s := &subs{}
	p := &blockingPoster{release: make(chan struct{}), got: map[string][]string{}}
	close(p.release)
	f := &stream.Fanout{Subs: s, Poster: p, Poll: time.Hour, Flush: time.Millisecond}
	a := f.Begin(t.Context(), "t_3", 2)
	want := strings.Repeat("é", stream.MaxFrameText) // two bytes each: 2×MaxFrameText bytes
	a.Delta(want)
	s.mu.Lock()
	s.ids = []string{"late"} // found by Done's last look
	s.mu.Unlock()
	a.Done(t.Context(), "completed", "abc")
	p.mu.Lock()
	defer p.mu.Unlock()
	frames := p.got["late"]
	var text strings.Builder
	for i, raw := range frames[:len(frames)-1] {
		var fr stream.DeltaFrame
		if err := json.Unmarshal([]byte(raw), &fr); err != nil {
			t.Fatal(err)
		}
		if fr.Seq != i+1 || fr.Attempt != 2 || len(fr.Delta) > stream.MaxFrameText || !utf8.ValidString(fr.Delta) {
			t.Fatalf("frame %d: seq %d attempt %d, %d bytes, valid UTF-8 %t", i, fr.Seq, fr.Attempt, len(fr.Delta), utf8.ValidString(fr.Delta))
		}
		text.WriteString(fr.Delta)
	}
	if len(frames) < 3 || text.String() != want {
		t.Fatalf("%d frames carrying %d bytes, want at least 2 delta frames and a done frame carrying %d", len(frames), text.Len(), len(want))
	}
}

// failingPoster fails every post to "flaky" (not gone: the outcome of
// such a post is unknown) and records the others.
type failingPoster struct {
	mu    sync.Mutex
	got   map[string][]string
	tries map[string]int
}

func (p *failingPoster) PostToConnection(_ context.Context, id string, data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tries[id]++
	if id == "flaky" {
		return errors.New("503")
	}
	p.got[id] = append(p.got[id], string(data))
	return nil
}

// A post that failed (not gone) might have arrived: that connection gets
// nothing more of the attempt — no repeat, no done frame — while the
// others are served to the end.
func TestFailedPostEndsThatConnectionsStream(t *testing.T) {
	t.Parallel()
	s := &subs{ids: []string{"flaky", "ok"}}
	p := &failingPoster{got: map[string][]string{}, tries: map[string]int{}}
	f := &stream.Fanout{Subs: s, Poster: p, Poll: time.Millisecond, Flush: time.Millisecond}
	a := f.Begin(t.Context(), "t_4", 1)
	for range 20 {
		a.Delta("word ")
		time.Sleep(time.Millisecond) // several flushes, so posts repeat
	}
	a.Done(t.Context(), "completed", "abc")
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tries["flaky"] != 1 {
		t.Fatalf("%d posts to the flaky connection, want 1 (then none)", p.tries["flaky"])
	}
	if ok := p.got["ok"]; len(ok) == 0 || !strings.Contains(ok[len(ok)-1], `"done":true`) {
		t.Fatalf("the healthy connection got %v, want a done frame last", ok)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unsub) != 0 {
		t.Fatalf("unsubscribed %v: a failed post is not a gone connection", s.unsub)
	}
}
