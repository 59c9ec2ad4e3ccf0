package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12+1e-9*math.Abs(b) }

// A 20 s reply followed by a WebSocket subscriber costs its frames (one
// message each, every 100 ms, plus the subscribe, its answer and the done
// frame), one connection-minute, the connections table's five writes and
// two reads, the worker's 22 eventually consistent polls, four route
// invocations and the one GET after the done frame; polled every second
// it costs 20 GETs, each an HTTP API request, a function invocation and a
// consistent GetItem. The figures are worked out here by hand from the
// published prices.
func TestStreamingCostIsThePublishedPricesTimesTheCalls(t *testing.T) {
	t.Parallel()
	p := PricesUSEast1
	w := DefaultStreamingWorkload()
	c := PriceStreaming(w, p)

	gbs := 0.010 * 256.0 / 1024 // 10 ms at 256 MB
	wantStream := 203*1.00e-6 + // messages: 1 subscribe + 1 answer + 200 deltas + 1 done
		1*0.25e-6 + // one connection-minute
		5*0.625e-6 + // connect, subscribe (2), disconnect (2 deletes)
		(2+11+1)*0.125e-6 + // disconnect + subscribe reads, 22 polls at 0.5, the final GET's GetItem
		5*0.20e-6 + 5*gbs*0.0000133334 + // 4 route invocations + the final GET's
		1*1.00e-6 // the final GET's HTTP API request
	wantPoll := 20*1.00e-6 + 20*0.20e-6 + 20*gbs*0.0000133334 + 20*0.125e-6
	if !near(c.Streaming.USD, wantStream) {
		t.Errorf("streaming: $%.10f per task, want $%.10f", c.Streaming.USD, wantStream)
	}
	if !near(c.Polling.USD, wantPoll) {
		t.Errorf("polling: $%.10f per task, want $%.10f", c.Polling.USD, wantPoll)
	}
	if c.Streaming.Messages != 203 || c.Streaming.ConnectionMinutes != 1 || c.Streaming.WriteUnits != 5 || c.Streaming.ReadUnits != 14 || c.Streaming.Invocations != 5 || c.Streaming.HTTPRequests != 1 {
		t.Errorf("streaming units: %+v", c.Streaming)
	}
	if c.Polling.HTTPRequests != 20 || c.Polling.Invocations != 20 || c.Polling.ReadUnits != 20 || c.Polling.Messages != 0 {
		t.Errorf("polling units: %+v", c.Polling)
	}

	// Frames every second instead of every 100 ms: 20 deltas.
	w.Flush = time.Second
	if got := PriceStreaming(w, p).Streaming.Messages; got != 23 {
		t.Errorf("1 s frames: %v messages, want 23", got)
	}
	// A frame over 32 KB is billed in 32 KB units.
	w = DefaultStreamingWorkload()
	w.FrameBytes = 40 * 1024
	if got := PriceStreaming(w, p).Streaming.Messages; got != 3+2*200 {
		t.Errorf("40 KB frames: %v messages, want 403", got)
	}

	// The printed table shows the computed totals.
	var buf bytes.Buffer
	WriteStreamingTable(&buf, DefaultStreamingWorkload(), p)
	out := buf.String()
	for _, want := range []string{usd(wantStream), usd(wantPoll), "WebSocket messages", "GET /tasks/{id}"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
