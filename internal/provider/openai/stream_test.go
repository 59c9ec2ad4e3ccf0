package openai_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/openai"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

const (
	chunkRole  = `{"id":"chatcmpl-9","model":"gpt-test-2025","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	chunkA     = `{"id":"chatcmpl-9","model":"gpt-test-2025","choices":[{"index":0,"delta":{"content":"Messages "},"finish_reason":null}]}`
	chunkB     = `{"id":"chatcmpl-9","model":"gpt-test-2025","choices":[{"index":0,"delta":{"content":"wait in\nline"},"finish_reason":null}]}`
	chunkStop  = `{"id":"chatcmpl-9","model":"gpt-test-2025","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	chunkUsage = `{"id":"chatcmpl-9","model":"gpt-test-2025","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`
)

func streamServer(t *testing.T, body string, got *map[string]any) bundle {
	return setup(t, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if got != nil {
			_ = json.Unmarshal(raw, got)
		}
		if r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("Accept = %q, want text/event-stream", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Request-Id", "req-9")
		_, _ = io.WriteString(w, body)
	})
}

// The stream's deltas, in order, make the result's text; usage comes from
// the last chunk; comments, event fields and CRLF line ends are SSE too.
func TestGenerateStreamParsesServerSentEvents(t *testing.T) {
	t.Parallel()
	var sent map[string]any
	body := ": keep-alive\r\n\r\n" + "event: message\r\ndata: " + chunkRole + "\r\n\r\n" + sse(chunkA, chunkB, chunkStop, chunkUsage, "[DONE]")
	b := streamServer(t, body, &sent)
	var deltas []string
	res, err := b.p.GenerateStream(t.Context(), req("op-s"), func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if sent["stream"] != true || sent["stream_options"].(map[string]any)["include_usage"] != true {
		t.Fatalf("request %v, want stream true with include_usage", sent)
	}
	var out contract.GenerateOutput
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Join(deltas, "") != out.Text || out.Text != "Messages wait in\nline" {
		t.Fatalf("deltas %q, text %q", deltas, out.Text)
	}
	if out.StopReason != "stop" || out.Model != "gpt-test-2025" || res.ProviderRef != "chatcmpl-9" {
		t.Fatalf("output %+v ref %s", out, res.ProviderRef)
	}
	if res.Usage == nil || *res.Usage != (contract.Usage{InputTokens: 12, OutputTokens: 5}) {
		t.Fatalf("usage %+v, want 12/5", res.Usage)
	}
}

// A 2xx stream that ends before its finish reason or [DONE], or with an
// error event, was generating: uncertain, never a result.
func TestGenerateStreamCutIsUncertain(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"cut mid-stream":      sse(chunkA, chunkB),
		"no [DONE], no stop":  sse(chunkA),
		"error event":         sse(chunkA, `{"error":{"message":"Messages wait was quoted","type":"server_error"}}`),
		"unreadable event":    sse(chunkA, `{"choices":[`),
		"[DONE] without stop": sse(chunkA, "[DONE]"),
	} {
		b := streamServer(t, body, nil)
		_, err := b.p.GenerateStream(t.Context(), req("op-cut"), func(string) {})
		if got := retrypolicy.Classify(err).Class; got != retrypolicy.UnknownOutcome {
			t.Errorf("%s: %v has class %v, want unknown outcome", name, err, got)
		}
		if err != nil && strings.Contains(err.Error(), "Messages wait") {
			t.Errorf("%s: the error quotes the output: %v", name, err)
		}
	}
}

// A stream the content filter stopped ran (and billed): permanent, acted.
func TestGenerateStreamContentFilterIsPermanentAndActed(t *testing.T) {
	t.Parallel()
	b := streamServer(t, sse(chunkA, `{"choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}`, "[DONE]"), nil)
	_, err := b.p.GenerateStream(t.Context(), req("op-cf"), func(string) {})
	if retrypolicy.Classify(err).Class != retrypolicy.PermanentInput || !strings.Contains(err.Error(), "content filter") {
		t.Fatalf("error %v, want permanent content filter", err)
	}
}

// An error status is answered as Generate answers it (the body is JSON,
// not a stream).
func TestGenerateStreamErrorStatusIsSteeredAsGenerate(t *testing.T) {
	t.Parallel()
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit"}}`)
	})
	_, err := b.p.GenerateStream(t.Context(), req("op-429"), func(string) { t.Error("a delta from an error status") })
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.Transient || c.RetryAfter.Seconds() != 3 {
		t.Fatalf("classify %+v, want throttled with Retry-After 3 s", c)
	}
}

var _ contract.Streamer = (*openai.Provider)(nil)
