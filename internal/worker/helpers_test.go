package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// hangBound is how long a test waits for something that must happen (a
// handler returning, a call starting, a message arriving) before it calls
// it hung. A bound, not a speed check: the worker's tests run in parallel,
// their moto legs sharing testenv's few moto_servers, each serving one
// DynamoDB request at a time, where a handler that repeats its saves can
// take tens of seconds.
const hangBound = 90 * time.Second

// visibilityCall is one ChangeMessageVisibility the worker made.
type visibilityCall struct {
	receipt string
	secs    int32
}

// recordingSQS wraps the real SQS client and records visibility changes.
type recordingSQS struct {
	next  worker.SQS
	mu    sync.Mutex
	calls []visibilityCall
}

func (r *recordingSQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	r.mu.Lock()
	r.calls = append(r.calls, visibilityCall{aws.ToString(in.ReceiptHandle), in.VisibilityTimeout})
	r.mu.Unlock()
	return r.next.ChangeMessageVisibility(ctx, in, opts...)
}

func (r *recordingSQS) Calls() []visibilityCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]visibilityCall(nil), r.calls...)
}

// bundle is one test's worker on one backend.
type bundle struct {
	e       *testenv.Env
	clock   *testenv.Clock
	l       *ledger.Ledger
	sim     *simulated.Provider
	sqs     *recordingSQS
	h       *worker.Handler
	logs    *testenv.Buffer
	metrics *testenv.Buffer
}

type options struct {
	sim     simulated.Options
	handler func(*worker.Handler)
}

func withSim(o simulated.Options) func(*options) { return func(x *options) { x.sim = o } }
func withHandler(f func(*worker.Handler)) func(*options) {
	return func(x *options) { x.handler = f }
}

func setup(t *testing.T, e *testenv.Env, opts ...func(*options)) *bundle {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	// The clock starts at the real time, or past the UTC midnight within
	// testenv.DayMargin of it: the quota counts per UTC day, and a test that
	// moves its clock on by minutes across midnight would find its calls in
	// the next day's count.
	b := &bundle{e: e, clock: testenv.NewClock(testenv.ClockStart(time.Now())), logs: &testenv.Buffer{}, metrics: &testenv.Buffer{}}
	// Short polls only (see poll).
	if _, err := e.SQS.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{
		QueueUrl:   aws.String(e.Names.TaskQueueURL),
		Attributes: map[string]string{string(sqstypes.QueueAttributeNameReceiveMessageWaitTimeSeconds): "0"},
	}); err != nil {
		t.Fatal(err)
	}
	b.l = newLedger(t, e, b.clock, "")
	b.sim = simulated.New(o.sim)
	b.sqs = &recordingSQS{next: e.SQS}
	b.h = b.handler(b.l, b.sim)
	if o.handler != nil {
		o.handler(b.h)
	}
	return b
}

// handler returns a worker over l and p sharing the bundle's queue, logs
// and metrics, with small retry delays.
func (b *bundle) handler(l *ledger.Ledger, p contract.Provider) *worker.Handler {
	return &worker.Handler{
		Ledger:   l,
		Provider: p,
		SQS:      b.sqs,
		QueueURL: b.e.Names.TaskQueueURL,
		Policy:   retrypolicy.Policy{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond},
		// The repeats of a failing save, without their real-time waits.
		SaveBackoff: time.Millisecond,
		Lease:       30 * time.Second,
		Log:         logging.New(b.logs, "debug"),
		Metrics:     metrics.NewWriter(b.metrics),
	}
}

// testShards is the by_state shard count of the tests' ledgers, as in the
// reconciler's tests: every reconciler run a test makes queries each
// (partition, shard) stream, whatever the tables hold — 64 queries at the
// default 16 shards, 8 at 2; they were most of the moto legs' requests.
// The rules under test see a handful of tasks and do not depend on the
// count; two shards still spread them over more than one stream. Every ledger of a test
// shares it (a task indexed in a shard the walk does not query is never
// found).
const testShards = 2

func newLedger(t *testing.T, e *testenv.Env, c *testenv.Clock, reviewTable string) *ledger.Ledger {
	t.Helper()
	if reviewTable == "" {
		reviewTable = e.Names.ReviewTable
	}
	l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: reviewTable, Now: c.Now, Shards: testShards})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// create records a queued task of scope "anonymous" (so the sample events'
// task ids match their keys).
func (b *bundle) create(t *testing.T, key, input string, mod ...func(*ledger.NewTask)) *ledger.Task {
	t.Helper()
	n := ledger.NewTask{Scope: "anonymous", IdempotencyKey: key, Kind: contract.KindGenerate,
		Input: input, PayloadSHA256: "sha-" + key, CorrelationID: "corr-" + key}
	for _, m := range mod {
		m(&n)
	}
	task, err := b.l.Create(context.Background(), n)
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	return task
}

func (b *bundle) get(t *testing.T, id string) *ledger.Task {
	t.Helper()
	task, err := b.l.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return task
}

const prompt = `{"prompt":"write one line about ledgers"}`

// send puts a task reference on the real queue, as submit does.
func (b *bundle) send(t *testing.T, taskID string) {
	t.Helper()
	body := fmt.Sprintf(`{"task_id":%q}`, taskID)
	b.sendBody(t, body, nil)
}

// sendBody sends a raw body with message attributes and returns the
// SendMessage output.
func (b *bundle) sendBody(t *testing.T, body string, attrs map[string]sqstypes.MessageAttributeValue) *sqs.SendMessageOutput {
	t.Helper()
	out, err := b.e.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(b.e.Names.TaskQueueURL), MessageBody: aws.String(body), MessageAttributes: attrs,
	})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return out
}

// receive collects n messages from the real queue (receipt handles are
// real), hiding them for visibility. It fails after a bounded wait.
func (b *bundle) receive(t *testing.T, n int, visibility int32) []sqstypes.Message {
	t.Helper()
	var got []sqstypes.Message
	deadline := time.Now().Add(hangBound)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got = append(got, b.poll(t, int32(min(n-len(got), 10)), visibility)...)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d messages within %s", len(got), n, hangBound)
		}
		<-tick.C
	}
}

// poll is one short-poll ReceiveMessage (setup set the queue's wait time
// to 0: moto_server stalls every request while any receive long-polls).
func (b *bundle) poll(t *testing.T, max, visibility int32) []sqstypes.Message {
	t.Helper()
	out, err := b.e.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(b.e.Names.TaskQueueURL),
		MaxNumberOfMessages:         max,
		VisibilityTimeout:           visibility,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return out.Messages
}

// loadEvent reads a sample event from events/ and checks that it survives a
// round trip through events.SQSEvent.
func loadEvent(t *testing.T, name string) events.SQSEvent {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(ev.Records) == 0 {
		t.Fatalf("%s has no records", name)
	}
	return ev
}

// event builds a Lambda SQS event from messages really received, using the
// sample file's records as templates (matched by body, else the first): the
// shape is the sample's, the ids, receipts and attributes are real.
func (b *bundle) event(t *testing.T, sample events.SQSEvent, msgs []sqstypes.Message) events.SQSEvent {
	t.Helper()
	var ev events.SQSEvent
	for _, m := range msgs {
		tpl := sample.Records[0]
		for _, r := range sample.Records {
			if r.Body == aws.ToString(m.Body) {
				tpl = r
				break
			}
		}
		rec := tpl
		rec.MessageId = aws.ToString(m.MessageId)
		rec.ReceiptHandle = aws.ToString(m.ReceiptHandle)
		rec.Body = aws.ToString(m.Body)
		rec.Md5OfBody = aws.ToString(m.MD5OfBody)
		rec.Md5OfMessageAttributes = aws.ToString(m.MD5OfMessageAttributes)
		rec.EventSourceARN = b.e.Names.TaskQueueARN
		rec.Attributes = map[string]string{}
		for k, v := range m.Attributes {
			rec.Attributes[k] = v
		}
		rec.MessageAttributes = map[string]events.SQSMessageAttribute{}
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{
				DataType: aws.ToString(v.DataType), StringValue: v.StringValue,
				StringListValues: []string{}, BinaryListValues: [][]byte{},
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	// What Lambda hands the function is JSON: make sure this event is too.
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var back events.SQSEvent
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	return back
}

// deliver receives n messages and wraps them as one event.
func (b *bundle) deliver(t *testing.T, n int, visibility int32) events.SQSEvent {
	t.Helper()
	return b.event(t, loadEvent(t, "sqs-batch.json"), b.receive(t, n, visibility))
}

// handle runs the worker and fails the test on a handler error.
func handle(t *testing.T, h *worker.Handler, ctx context.Context, ev events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	resp, err := h.Handle(ctx, ev)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	return resp
}

func failedIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func wantNoFailures(t *testing.T, resp events.SQSEventResponse) {
	t.Helper()
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("item failures %v, want none", failedIDs(resp))
	}
}

func wantFailures(t *testing.T, resp events.SQSEventResponse, ids ...string) {
	t.Helper()
	got := strings.Join(failedIDs(resp), ",")
	if got != strings.Join(ids, ",") {
		t.Fatalf("item failures [%s], want [%s]", got, strings.Join(ids, ","))
	}
}

func wantState(t *testing.T, task *ledger.Task, s ledger.State) {
	t.Helper()
	if task.State != s {
		t.Fatalf("task %s state %s (error %s: %s), want %s", task.TaskID, task.State, task.ErrorClass, task.ErrorMessage, s)
	}
}

// gate is a provider that blocks inside Generate until released or until
// its context ends, then delegates (or returns a fixed "late" result).
type gate struct {
	inner   *simulated.Provider
	started chan struct{}
	release chan struct{}
	// ignoreCtx makes the call deaf to cancellation (a provider that keeps
	// working after the worker gave up); late, if set, is its result.
	ignoreCtx bool
	late      *contract.Result

	mu    sync.Mutex
	cause error
}

func newGate(inner *simulated.Provider) *gate {
	return &gate{inner: inner, started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gate) Name() string                { return g.inner.Name() }
func (g *gate) HonoursIdempotencyKey() bool { return g.inner.HonoursIdempotencyKey() }

func (g *gate) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	g.started <- struct{}{}
	if g.ignoreCtx {
		<-g.release
	} else {
		select {
		case <-g.release:
		case <-ctx.Done():
			g.mu.Lock()
			g.cause = context.Cause(ctx)
			g.mu.Unlock()
			return contract.Result{}, retrypolicy.Uncertain(fmt.Errorf("gate: call interrupted after it was sent: %w", context.Cause(ctx)))
		}
	}
	if g.late != nil {
		return *g.late, nil
	}
	return g.inner.Generate(context.WithoutCancel(ctx), req)
}

func (g *gate) Cause() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cause
}

// waitStarted waits until a call entered the gate.
func (g *gate) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(hangBound):
		t.Fatalf("provider call did not start within %s", hangBound)
	}
}

// await waits for a handler running in the background.
func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangBound):
		t.Fatalf("handler did not return within %s", hangBound)
	}
	var zero T
	return zero
}

// emf returns the batch metric records the worker wrote.
func emf(t *testing.T, b *bundle) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.metrics.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		if _, ok := m["Records"]; ok {
			out = append(out, m)
		}
	}
	return out
}

// sum adds a metric over the batch records.
func sum(recs []map[string]any, name string) int {
	n := 0
	for _, r := range recs {
		if v, ok := r[name].(float64); ok {
			n += int(v)
		}
	}
	return n
}

var errDie = errors.New("simulated crash")

// wantParkedUncalled asserts that task id was parked provider_config
// without a provider call, its review's error message naming why.
func wantParkedUncalled(t *testing.T, b *bundle, id, why string) {
	t.Helper()
	got := b.get(t, id)
	wantState(t, got, ledger.StateNeedsReview)
	if got.ReviewReason != ledger.ReviewProviderConfig || b.sim.Calls(id) != 0 {
		t.Fatalf("reason %q calls %d; want provider_config and no call", got.ReviewReason, b.sim.Calls(id))
	}
	r, err := b.l.GetReview(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.ErrorMessage, why) {
		t.Fatalf("review error %q, want it to say %q", r.ErrorMessage, why)
	}
}
