package local_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/internal/stream"
	"github.com/taskledger/taskledger/internal/testenv"
)

// frame is any server frame of the streaming protocol.
type frame struct {
	TaskID       string `json:"task_id"`
	Attempt      int    `json:"attempt"`
	Seq          int    `json:"seq"`
	Delta        string `json:"delta"`
	Done         bool   `json:"done"`
	State        string `json:"state"`
	ResultSHA256 string `json:"result_sha256"`
	Subscribed   string `json:"subscribed"`
	Error        string `json:"error"`
}

// wsClient is a black-box client of the documented protocol.
type wsClient struct {
	c      *websocket.Conn
	frames chan frame
}

func dialStream(t *testing.T, url, token string) (*wsClient, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	protos := []string{stream.Subprotocol}
	if token != "" {
		protos = append(protos, stream.BearerProtocolPrefix+token)
	}
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: protos})
	if err != nil {
		return nil, resp, err
	}
	w := &wsClient{c: c, frames: make(chan frame, 1024)}
	go func() {
		defer close(w.frames)
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				return
			}
			var f frame
			if err := json.Unmarshal(b, &f); err != nil {
				t.Errorf("frame %s is not JSON: %v", b, err)
				return
			}
			w.frames <- f
		}
	}()
	t.Cleanup(func() { _ = c.CloseNow() })
	return w, resp, nil
}

func (w *wsClient) subscribe(t *testing.T, taskID string) frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageText, []byte(`{"action":"subscribe","task_id":"`+taskID+`"}`)); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	return w.next(t, 10*time.Second)
}

func (w *wsClient) next(t *testing.T, within time.Duration) frame {
	t.Helper()
	select {
	case f, ok := <-w.frames:
		if !ok {
			t.Fatal("connection closed while a frame was awaited")
		}
		return f
	case <-time.After(within):
		t.Fatalf("no frame within %v", within)
	}
	return frame{}
}

// text reads frames up to the done frame; it returns the text of the
// attempt the done frame names and every frame read.
func (w *wsClient) untilDone(t *testing.T, within time.Duration) (string, frame, []frame) {
	t.Helper()
	deadline := time.Now().Add(within)
	var all []frame
	texts := map[int]*strings.Builder{}
	lastSeq := map[int]int{}
	for {
		f := w.next(t, time.Until(deadline))
		all = append(all, f)
		if f.Done {
			b := texts[f.Attempt]
			if b == nil {
				b = &strings.Builder{}
			}
			return b.String(), f, all
		}
		if f.Error != "" {
			t.Fatalf("error frame %+v", f)
		}
		if f.Seq <= lastSeq[f.Attempt] {
			t.Fatalf("frame seq %d after %d in attempt %d", f.Seq, lastSeq[f.Attempt], f.Attempt)
		}
		lastSeq[f.Attempt] = f.Seq
		if texts[f.Attempt] == nil {
			texts[f.Attempt] = &strings.Builder{}
		}
		texts[f.Attempt].WriteString(f.Delta)
	}
}

func savedText(t *testing.T, b stackBundle, id string) (text, sum string) {
	t.Helper()
	task, err := b.st.Ledger.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out provider.GenerateOutput
	if err := json.Unmarshal([]byte(task.Result), &out); err != nil {
		t.Fatalf("saved result: %v", err)
	}
	h := sha256.Sum256([]byte(task.Result))
	if got := hex.EncodeToString(h[:]); got != task.ResultSHA256 {
		t.Fatalf("the ledger's result_sha256 %s is not the hash of its result %s", task.ResultSHA256, got)
	}
	return out.Text, task.ResultSHA256
}

// Streamed replies end to end on make run: a signed-in caller subscribes
// over the documented protocol and gets the text while the task runs,
// then a done frame naming the saved result's hash; another caller is
// refused; a late subscriber gets the text so far first; a retried
// attempt streams afresh as attempt 2; a connection that is gone does not
// stop the worker.
func TestStackStreamsRepliesToSubscribers(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		is := newTestIssuer(t)
		b := setupStack(t, local.Options{
			StatusEvery:  -1,
			Endpoint:     e.Endpoint,
			Region:       e.AWS.Region,
			PollWait:     local.EmbeddedPollWait,
			OIDCIssuer:   is.srv.URL,
			OIDCAudience: []string{"client-1"},
			// About 30 chunks at 60 ms: the reply takes some 2 s to stream.
			Provider:   provider.Config{SimulatedStreamDelay: 60 * time.Millisecond},
			StreamPoll: 100 * time.Millisecond,
		})
		alice := is.token(t, is.key, map[string]any{"sub": "alice", "aud": "client-1"})
		bob := is.token(t, is.key, map[string]any{"sub": "bob", "aud": "client-1"})

		status, body := b.request(t, http.MethodGet, "/auth/config", "", "", "")
		var cfg struct {
			StreamURL string `json:"stream_url"`
		}
		if status != http.StatusOK || json.Unmarshal([]byte(body), &cfg) != nil || cfg.StreamURL != b.st.StreamURL || cfg.StreamURL == "" {
			t.Fatalf("GET /auth/config = %d %s, want stream_url %s", status, body, b.st.StreamURL)
		}

		t.Run("no token, no connection", func(t *testing.T) {
			_, resp, err := dialStream(t, cfg.StreamURL, "")
			if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("dial without a token: %v (response %v), want 401", err, resp)
			}
			_, resp, err = dialStream(t, cfg.StreamURL, "garbage")
			if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("dial with a bad token: %v, want 401", err)
			}
		})

		submit := func(t *testing.T, key, input string) string {
			status, body := b.request(t, http.MethodPost, "/tasks", alice, key, `{"kind":"generate","input":`+input+`}`)
			var v taskView
			if status != http.StatusAccepted || json.Unmarshal([]byte(body), &v) != nil {
				t.Fatalf("POST /tasks = %d %s", status, body)
			}
			return v.TaskID
		}
		taskState := func(t *testing.T, id string) string {
			task, err := b.st.Ledger.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			return string(task.State)
		}

		awaitCompleted := func(t *testing.T, id string) {
			eventually(t, 60*time.Second, "task "+id+" completed", func() bool { return taskState(t, id) == "completed" })
		}

		t.Run("deltas before completion, then the saved result's hash", func(t *testing.T) {
			id := submit(t, "stream-1", `{"prompt":"stream to me"}`)
			w, _, err := dialStream(t, cfg.StreamURL, alice)
			if err != nil {
				t.Fatal(err)
			}
			if f := w.subscribe(t, id); f.Subscribed != id {
				t.Fatalf("subscribe answered %+v", f)
			}
			first := w.next(t, 30*time.Second)
			if first.Delta == "" || first.TaskID != id || first.Attempt != 1 {
				t.Fatalf("first frame %+v, want a delta of attempt 1", first)
			}
			// The stream runs ahead of the save: the task is still running.
			if s := taskState(t, id); s != "running" {
				t.Fatalf("task is %s when its first delta arrived, want running", s)
			}
			rest, done, frames := w.untilDone(t, 30*time.Second)
			text := first.Delta + rest
			if len(frames) < 3 {
				t.Fatalf("got %d frames, want the reply in several", len(frames))
			}
			saved, sum := savedText(t, b, id)
			if done.State != "completed" || done.ResultSHA256 != sum || done.Attempt != 1 {
				t.Fatalf("done frame %+v, want completed with result_sha256 %s", done, sum)
			}
			if text != saved {
				t.Fatalf("streamed text %q, saved %q", text, saved)
			}
		})

		t.Run("another caller's task is refused", func(t *testing.T) {
			id := submit(t, "stream-2", `{"prompt":"mine only"}`)
			w, _, err := dialStream(t, cfg.StreamURL, bob)
			if err != nil {
				t.Fatal(err)
			}
			if f := w.subscribe(t, id); f.Error != stream.CodeTaskNotFound || f.Subscribed != "" {
				t.Fatalf("bob's subscribe to alice's task answered %+v, want %s", f, stream.CodeTaskNotFound)
			}
			awaitCompleted(t, id)
			select {
			case f := <-w.frames:
				t.Fatalf("bob got a frame of alice's task: %+v", f)
			default:
			}
		})

		t.Run("a late subscriber gets the text so far first", func(t *testing.T) {
			id := submit(t, "stream-3", `{"prompt":"late"}`)
			early, _, err := dialStream(t, cfg.StreamURL, alice)
			if err != nil {
				t.Fatal(err)
			}
			early.subscribe(t, id)
			var seen strings.Builder
			for range 5 {
				seen.WriteString(early.next(t, 30*time.Second).Delta)
			}
			late, _, err := dialStream(t, cfg.StreamURL, alice)
			if err != nil {
				t.Fatal(err)
			}
			late.subscribe(t, id)
			first := late.next(t, 30*time.Second)
			if !strings.HasPrefix(first.Delta, seen.String()) {
				t.Fatalf("late subscriber's first frame %q does not hold the text so far %q", first.Delta, seen.String())
			}
			rest, done, _ := late.untilDone(t, 30*time.Second)
			saved, sum := savedText(t, b, id)
			if first.Delta+rest != saved || done.ResultSHA256 != sum {
				t.Fatalf("late subscriber's text %q (done %+v), saved %q (%s)", first.Delta+rest, done, saved, sum)
			}
		})

		t.Run("a retried attempt streams afresh as attempt 2", func(t *testing.T) {
			// The reply is streamed, then lost: the retry-safe generation
			// is retried, and the provider answers it again.
			id := submit(t, "stream-4", `{"prompt":"again","simulate":"accept_lose_reply"}`)
			w, _, err := dialStream(t, cfg.StreamURL, alice)
			if err != nil {
				t.Fatal(err)
			}
			w.subscribe(t, id)
			text, done, frames := w.untilDone(t, 90*time.Second)
			attempts := map[int]bool{}
			for _, f := range frames {
				attempts[f.Attempt] = true
			}
			if done.Attempt != 2 || !attempts[1] {
				t.Fatalf("done frame %+v after frames of attempts %v, want attempt 1's stream then attempt 2's done", done, attempts)
			}
			saved, sum := savedText(t, b, id)
			if text != saved || done.ResultSHA256 != sum {
				t.Fatalf("attempt 2's text %q, saved %q", text, saved)
			}
		})

		t.Run("a gone connection does not stop the worker", func(t *testing.T) {
			id := submit(t, "stream-5", `{"prompt":"into the void"}`)
			// A subscription whose connection is gone without its
			// $disconnect (the gateway answers 410 to it).
			table := &stream.Table{DB: b.st.DDB, ConnectionsTable: b.st.Names.ConnectionsTable}
			if err := table.Connect(t.Context(), "gone-conn", "jwt:alice"); err != nil {
				t.Fatal(err)
			}
			if err := table.Subscribe(t.Context(), "gone-conn", id); err != nil {
				t.Fatal(err)
			}
			w, _, err := dialStream(t, cfg.StreamURL, alice)
			if err != nil {
				t.Fatal(err)
			}
			w.subscribe(t, id)
			w.next(t, 30*time.Second)
			_ = w.c.CloseNow() // and one that drops mid-stream
			awaitCompleted(t, id)
			subs, err := table.Subscribers(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range subs {
				if s == "gone-conn" {
					t.Fatalf("the gone connection is still subscribed (%v): the worker should drop it on 410", subs)
				}
			}
		})
	})
}
