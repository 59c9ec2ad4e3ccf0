package bedrock_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/taskledger/taskledger/internal/provider/bedrock"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// event is one message of a ConverseStream response: an event of a type,
// or an exception.
type event struct{ kind, typ, payload string }

func ev(typ, payload string) event  { return event{"event", typ, payload} }
func exc(typ, payload string) event { return event{"exception", typ, payload} }

// streamServer answers ConverseStream with the events, encoded as AWS
// event stream messages, as Bedrock sends them; it records the request.
func streamServer(t *testing.T, path *string, sent *map[string]any, events ...event) *bedrock.Provider {
	return setup(t, func(w http.ResponseWriter, r *http.Request) {
		*path = r.URL.Path
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, sent)
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.Header().Set("X-Amzn-Requestid", "req-s1")
		w.WriteHeader(http.StatusOK)
		enc := eventstream.NewEncoder()
		for _, e := range events {
			var h eventstream.Headers
			h.Set(":message-type", eventstream.StringValue(e.kind))
			if e.kind == "event" {
				h.Set(":event-type", eventstream.StringValue(e.typ))
			} else {
				h.Set(":exception-type", eventstream.StringValue(e.typ))
			}
			h.Set(":content-type", eventstream.StringValue("application/json"))
			var b bytes.Buffer
			if err := enc.Encode(&b, eventstream.Message{Headers: h, Payload: []byte(e.payload)}); err != nil {
				t.Error(err)
				return
			}
			_, _ = w.Write(b.Bytes())
			w.(http.Flusher).Flush()
		}
	})
}

func delta(text string) event {
	b, _ := json.Marshal(map[string]any{"contentBlockIndex": 0, "delta": map[string]string{"text": text}})
	return ev("contentBlockDelta", string(b))
}

var (
	start    = ev("messageStart", `{"role":"assistant"}`)
	blockEnd = ev("contentBlockStop", `{"contentBlockIndex":0}`)
	stopped  = ev("messageStop", `{"stopReason":"end_turn"}`)
	metadata = ev("metadata", `{"usage":{"inputTokens":11,"outputTokens":4,"totalTokens":15},"metrics":{"latencyMs":7}}`)
)

// The deltas of the event stream, in order, make the result's text, with
// the stop reason and usage of its last events, and the request is the
// Converse request sent to converse-stream.
func TestGenerateStreamReadsTheEventStream(t *testing.T) {
	t.Parallel()
	var path string
	var sent map[string]any
	p := streamServer(t, &path, &sent, start, delta("The ledger "), delta("records\n"), delta("tasks."), blockEnd, stopped, metadata)
	var deltas []string
	res, err := p.GenerateStream(t.Context(), req("op-s1"), func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, "/converse-stream") {
		t.Fatalf("request path %s, want .../converse-stream", path)
	}
	if sent["system"] == nil || sent["inferenceConfig"] == nil || sent["requestMetadata"].(map[string]any)[bedrock.MetadataOperationKey] != "op-s1" {
		t.Fatalf("request %v lacks the Converse request's system, inference config or operation id", sent)
	}
	var out contract.GenerateOutput
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deltas, ""); got != out.Text || got != "The ledger records\ntasks." || len(deltas) != 3 {
		t.Fatalf("deltas %q, text %q", deltas, out.Text)
	}
	if out.StopReason != "end_turn" || res.Usage == nil || *res.Usage != (contract.Usage{InputTokens: 11, OutputTokens: 4}) || res.ProviderRef != "req-s1" {
		t.Fatalf("result %+v usage %+v ref %s", out, res.Usage, res.ProviderRef)
	}
}

// A stream that fails, or ends before messageStop, was generating:
// uncertain. A content-filtered stop is refused as Generate refuses it.
func TestGenerateStreamEndingsAreSteeredAsGenerate(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		events []event
		want   retrypolicy.Class
	}{
		"exception mid-stream": {[]event{start, delta("The ledger "), exc("modelStreamErrorException", `{"message":"The ledger broke"}`)}, retrypolicy.UnknownOutcome},
		"no messageStop":       {[]event{start, delta("The ledger ")}, retrypolicy.UnknownOutcome},
		"content filtered":     {[]event{start, delta("x"), ev("messageStop", `{"stopReason":"content_filtered"}`), metadata}, retrypolicy.PermanentInput},
	}
	for name, c := range cases {
		var path string
		var sent map[string]any
		p := streamServer(t, &path, &sent, c.events...)
		_, err := p.GenerateStream(t.Context(), req("op-e"), func(string) {})
		if got := retrypolicy.Classify(err).Class; got != c.want {
			t.Errorf("%s: %v has class %v, want %v", name, err, got, c.want)
		}
	}
}

var _ contract.Streamer = (*bedrock.Provider)(nil)
