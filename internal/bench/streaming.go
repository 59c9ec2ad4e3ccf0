package bench

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/taskledger/taskledger/internal/stream"
)

// Streaming versus polling (docs/streaming.md, docs/cost.md): what one
// task's reply costs a client that follows it over the WebSocket API,
// beside one that reads the task every second until it is final. Pure
// arithmetic on the published prices and the calls the code makes; the
// submit and the worker's own calls are the same either way and left out.

// StreamingWorkload is one reply and how its client follows it.
type StreamingWorkload struct {
	// Reply is how long the generation streams (and the task stays live).
	Reply time.Duration
	// Flush is the least time between two frames to a connection
	// (stream.DefaultFlush); Poll the worker's subscriber poll
	// (stream.DefaultPoll).
	Flush, Poll time.Duration
	// ClientPoll is the polling client's GET /tasks/{id} interval.
	ClientPoll time.Duration
	// FrameBytes is a delta frame's size (billed in 32 KB units).
	FrameBytes int
	// ConnectionOverhead is how long a connection stays open beyond the
	// reply (connect, subscribe, the done frame, close).
	ConnectionOverhead time.Duration
	// FunctionMs and MemoryMB are one function invocation's billed
	// duration (assumed) and memory (the template's Globals).
	FunctionMs float64
	MemoryMB   int
}

// DefaultStreamingWorkload is a 20 s reply: frames at the default flush,
// the worker's default poll, a client polling every second.
func DefaultStreamingWorkload() StreamingWorkload {
	return StreamingWorkload{Reply: 20 * time.Second, Flush: stream.DefaultFlush, Poll: stream.DefaultPoll, ClientPoll: time.Second,
		FrameBytes: 200, ConnectionOverhead: 2 * time.Second, FunctionMs: 10, MemoryMB: 256}
}

// Billing units of one way of following a task, and their price.
type FollowCost struct {
	Messages, ConnectionMinutes float64 // API Gateway WebSocket
	HTTPRequests                float64 // API Gateway HTTP API
	Invocations, GBSeconds      float64 // Lambda
	WriteUnits, ReadUnits       float64 // DynamoDB on demand
	USD                         float64
}

func (f *FollowCost) price(p Prices) {
	f.USD = f.Messages*p.WebSocketMessage + f.ConnectionMinutes*p.WebSocketConnectionMinute + f.HTTPRequests*p.HTTPAPIRequest +
		f.Invocations*p.LambdaRequest + f.GBSeconds*p.LambdaGBSecond + f.WriteUnits*p.WriteRequestUnit + f.ReadUnits*p.ReadRequestUnit
}

// StreamingCost is one task followed by streaming and by polling.
type StreamingCost struct {
	Workload           StreamingWorkload
	Streaming, Polling FollowCost
}

const wsMessageUnit = 32 * 1024

// PriceStreaming prices w.
//
// Streaming, per task with one subscriber on one connection: WebSocket
// messages — the subscribe, its answer, a delta frame per Flush while the
// reply streams (each in 32 KB units) and the done frame; connection
// minutes, whole minutes (rounded up) of Reply + ConnectionOverhead; the
// connections table — per connection a put at $connect and a delete at
// $disconnect (2 writes) and the disconnect's consistent read of the
// connection item (1 read unit), per subscription the connection item's
// update, the subscription's put and its delete at $disconnect (3 writes)
// and the subscribe's consistent read of the task (1 read unit); the
// worker's eventually consistent Query for subscribers (0.5 read unit)
// once a Poll while the reply streams, once at the start and once before
// the done frame; four route invocations (authorizer, $connect,
// subscribe, $disconnect); and one GET /tasks/{id} after the done frame
// for the task view (an HTTP API request, an invocation, a consistent
// GetItem of an item under 4 KB).
//
// Polling: a GET /tasks/{id} every ClientPoll for Reply, each an HTTP API
// request, an invocation and a consistent GetItem.
func PriceStreaming(w StreamingWorkload, p Prices) StreamingCost {
	deltas := math.Ceil(float64(w.Reply) / float64(w.Flush))
	frameUnits := math.Max(1, math.Ceil(float64(w.FrameBytes)/wsMessageUnit))
	polls := math.Ceil(float64(w.Reply)/float64(w.Poll)) + 2
	gbs := LambdaGBSeconds(w.FunctionMs, w.MemoryMB)
	s := FollowCost{
		Messages:          2 + deltas*frameUnits + 1,
		ConnectionMinutes: math.Ceil(float64(w.Reply+w.ConnectionOverhead) / float64(time.Minute)),
		WriteUnits:        2 + 3,
		ReadUnits:         1 + 1 + polls*ReadUnits(0, false, false) + ReadUnits(0, true, false),
		Invocations:       4 + 1,
		HTTPRequests:      1,
	}
	s.GBSeconds = s.Invocations * gbs
	gets := math.Ceil(float64(w.Reply) / float64(w.ClientPoll))
	q := FollowCost{HTTPRequests: gets, Invocations: gets, GBSeconds: gets * gbs, ReadUnits: gets * ReadUnits(0, true, false)}
	s.price(p)
	q.price(p)
	return StreamingCost{Workload: w, Streaming: s, Polling: q}
}

// usd formats a per-task price.
func usd(v float64) string { return fmt.Sprintf("$%.8f", v) }

// WriteStreamingTable prints streaming and polling of w side by side, per
// task and per million tasks, with streaming at 1 s frames for scale.
func WriteStreamingTable(out io.Writer, w StreamingWorkload, p Prices) {
	c := PriceStreaming(w, p)
	slow := w
	slow.Flush = time.Second
	cs := PriceStreaming(slow, p).Streaming
	fmt.Fprintf(out, "streaming vs polling, one task with a %s reply (us-east-1; API Gateway prices of %s, the others of %s):\n", w.Reply, APIGatewayPricesRead, PricesRead)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "per task\tstreaming (%s frames)\tstreaming (1s frames)\tpolling (GET every %s)\t\n", w.Flush, w.ClientPoll)
	row := func(name string, f func(FollowCost) float64, price float64) {
		fmt.Fprintf(tw, "%s\t%g  %s\t%g  %s\t%g  %s\t\n", name, f(c.Streaming), usd(f(c.Streaming)*price), f(cs), usd(f(cs)*price), f(c.Polling), usd(f(c.Polling)*price))
	}
	row("WebSocket messages (32 KB units)", func(f FollowCost) float64 { return f.Messages }, p.WebSocketMessage)
	row("WebSocket connection-minutes", func(f FollowCost) float64 { return f.ConnectionMinutes }, p.WebSocketConnectionMinute)
	row("HTTP API requests (GET /tasks/{id})", func(f FollowCost) float64 { return f.HTTPRequests }, p.HTTPAPIRequest)
	row("Lambda invocations", func(f FollowCost) float64 { return f.Invocations }, p.LambdaRequest)
	row("Lambda GB-seconds", func(f FollowCost) float64 { return f.GBSeconds }, p.LambdaGBSecond)
	row("DynamoDB write units (connections table)", func(f FollowCost) float64 { return f.WriteUnits }, p.WriteRequestUnit)
	row("DynamoDB read units (table, polls, GetItem)", func(f FollowCost) float64 { return f.ReadUnits }, p.ReadRequestUnit)
	fmt.Fprintf(tw, "total per task\t%s\t%s\t%s\t\n", usd(c.Streaming.USD), usd(cs.USD), usd(c.Polling.USD))
	fmt.Fprintf(tw, "per million tasks\t$%.2f\t$%.2f\t$%.2f\t\n", c.Streaming.USD*1e6, cs.USD*1e6, c.Polling.USD*1e6)
	_ = tw.Flush()
}
