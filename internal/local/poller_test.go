package local_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// deliveries records what a Deliver saw, by message body.
type deliveries struct {
	mu       sync.Mutex
	byBody   map[string][]events.SQSMessage
	batches  []int
	requests map[string]bool
}

func newDeliveries() *deliveries {
	return &deliveries{byBody: map[string][]events.SQSMessage{}, requests: map[string]bool{}}
}

func (d *deliveries) add(ctx context.Context, t *testing.T, ev events.SQSEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	lc, ok := lambdacontext.FromContext(ctx)
	if !ok || lc.AwsRequestID == "" {
		t.Errorf("invocation without a lambdacontext request id")
	} else if d.requests[lc.AwsRequestID] {
		t.Errorf("request id %s reused", lc.AwsRequestID)
	} else {
		d.requests[lc.AwsRequestID] = true
	}
	d.batches = append(d.batches, len(ev.Records))
	for _, r := range ev.Records {
		d.byBody[r.Body] = append(d.byBody[r.Body], r)
	}
}

func (d *deliveries) count(body string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.byBody[body])
}

func (d *deliveries) last(body string) events.SQSMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	rs := d.byBody[body]
	return rs[len(rs)-1]
}

type pollerBundle struct {
	env    *testenv.Env
	poller *local.Poller
}

// setupPoller makes fresh queues on kumo and a Poller configured like the
// template's WorkerFunction mapping.
func setupPoller(t *testing.T) pollerBundle {
	t.Helper()
	e := testenv.New(t, "kumo")
	tpl := stack.MustLoadDefault()
	var m stack.EventSourceMapping
	for _, x := range tpl.SQSEvents() {
		if x.Function == "WorkerFunction" {
			m = x
		}
	}
	if m.BatchSize == 0 || !m.ReportBatchItemFailures {
		t.Fatalf("template's worker mapping = %+v, want a batch size and ReportBatchItemFailures", m)
	}
	p := local.MappingPoller(m, tpl.Functions()["WorkerFunction"])
	p.SQS = e.SQS
	p.QueueURL = e.Names.TaskQueueURL
	p.QueueARN = e.Names.TaskQueueARN
	p.Region = "us-east-1"
	p.PollWait = local.EmbeddedPollWait
	return pollerBundle{env: e, poller: p}
}

func send(t *testing.T, e *testenv.Env, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		_, err := e.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl:    &e.Names.TaskQueueURL,
			MessageBody: aws.String(b),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{
				"correlation_id": {DataType: aws.String("String"), StringValue: aws.String("c-" + b)},
			},
		})
		if err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

// makeVisible does what the worker does for a record it wants back soon.
func makeVisible(ctx context.Context, e *testenv.Env, r events.SQSMessage) error {
	_, err := e.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          &e.Names.TaskQueueURL,
		ReceiptHandle:     &r.ReceiptHandle,
		VisibilityTimeout: 0,
	})
	return err
}

// queueDepth is visible + in-flight messages.
func queueDepth(t *testing.T, e *testenv.Env) int {
	t.Helper()
	out, err := e.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &e.Names.TaskQueueURL,
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		t.Fatalf("GetQueueAttributes: %v", err)
	}
	n := 0
	for _, k := range []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	} {
		v, _ := strconv.Atoi(out.Attributes[string(k)])
		n += v
	}
	return n
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// run starts p and returns a stop function that waits for Run to return.
func run(t *testing.T, p *local.Poller) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(15 * time.Second):
				t.Errorf("Run did not return within 15s of cancellation")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// A batch item failure keeps exactly that record: the others are deleted and
// never come back; the failed one reappears (its visibility ended) and is
// deleted once it succeeds.
func TestPollerPartialBatch(t *testing.T) {
	t.Parallel()
	b := setupPoller(t)
	send(t, b.env, "ok-1", "fail-once", "ok-2")

	d := newDeliveries()
	var reports []local.BatchReport
	var mu sync.Mutex
	b.poller.OnBatch = func(r local.BatchReport) { mu.Lock(); reports = append(reports, r); mu.Unlock() }
	b.poller.Deliver = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		d.add(ctx, t, ev)
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) > b.poller.Timeout || time.Until(dl) < b.poller.Timeout-5*time.Second {
			t.Errorf("invocation deadline in %v, want about the function timeout %v", time.Until(dl), b.poller.Timeout)
		}
		resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		for _, r := range ev.Records {
			if r.EventSource != "aws:sqs" || r.EventSourceARN != b.env.Names.TaskQueueARN || r.AWSRegion != "us-east-1" {
				t.Errorf("record source = %q %q %q", r.EventSource, r.EventSourceARN, r.AWSRegion)
			}
			if got := r.MessageAttributes["correlation_id"].StringValue; got == nil || *got != "c-"+r.Body {
				t.Errorf("record %s: correlation_id attribute = %v", r.Body, got)
			}
			if r.Body == "fail-once" && r.Attributes["ApproximateReceiveCount"] == "1" {
				if err := makeVisible(ctx, b.env, r); err != nil {
					t.Errorf("ChangeMessageVisibility: %v", err)
				}
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		return resp, nil
	}
	stop := run(t, b.poller)

	eventually(t, 15*time.Second, "the failed record to come back and succeed", func() bool {
		return d.count("fail-once") >= 2 && queueDepth(t, b.env) == 0
	})
	stop()

	if n := d.count("fail-once"); n != 2 {
		t.Errorf("failed record delivered %d times, want 2", n)
	}
	if got := d.last("fail-once").Attributes["ApproximateReceiveCount"]; got != "2" {
		t.Errorf("redelivery ApproximateReceiveCount = %q, want 2", got)
	}
	for _, body := range []string{"ok-1", "ok-2"} {
		if n := d.count(body); n != 1 {
			t.Errorf("acknowledged record %s delivered %d times, want 1 (it must have been deleted)", body, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) < 2 || reports[0].Records != 3 || reports[0].ItemFailures != 1 || reports[0].Deleted != 2 {
		t.Errorf("reports = %+v, want first {Records:3 ItemFailures:1 Deleted:2}", reports)
	}
}

// An invocation error, or a failure naming a message that is not in the
// batch, deletes nothing: the whole batch comes back.
func TestPollerWholeBatchFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fail func(ev events.SQSEvent) (events.SQSEventResponse, error)
	}{
		{"error", func(events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, errors.New("boom")
		}},
		{"panic", func(events.SQSEvent) (events.SQSEventResponse, error) { panic("boom") }},
		{"unknown item", func(events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "not-in-batch"}}}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupPoller(t)
			send(t, b.env, "a", "b")
			d := newDeliveries()
			var calls atomic.Int32
			var failedReport atomic.Pointer[local.BatchReport]
			b.poller.OnBatch = func(r local.BatchReport) {
				if r.Err != nil {
					failedReport.Store(&r)
				}
			}
			b.poller.Deliver = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				d.add(ctx, t, ev)
				if calls.Add(1) == 1 {
					if len(ev.Records) != 2 {
						t.Errorf("first batch has %d records, want 2", len(ev.Records))
					}
					for _, r := range ev.Records {
						if err := makeVisible(ctx, b.env, r); err != nil {
							t.Errorf("ChangeMessageVisibility: %v", err)
						}
					}
					return tc.fail(ev)
				}
				return events.SQSEventResponse{}, nil
			}
			stop := run(t, b.poller)
			eventually(t, 15*time.Second, "both records to be redelivered and deleted", func() bool {
				return d.count("a") >= 2 && d.count("b") >= 2 && queueDepth(t, b.env) == 0
			})
			stop()
			if r := failedReport.Load(); r == nil || r.Deleted != 0 {
				t.Errorf("failed invocation report = %+v, want an error and nothing deleted", r)
			}
			if d.count("a") != 2 || d.count("b") != 2 {
				t.Errorf("deliveries a=%d b=%d, want 2 each", d.count("a"), d.count("b"))
			}
		})
	}
}

// At most MaxConcurrency batches are in flight.
func TestPollerMaxConcurrency(t *testing.T) {
	t.Parallel()
	b := setupPoller(t)
	b.poller.BatchSize = 1
	b.poller.MaxBatchingWindow = 0
	b.poller.MaxConcurrency = 2
	const n = 6
	for i := range n {
		send(t, b.env, fmt.Sprint("m", i))
	}
	var inFlight, peak, done atomic.Int32
	release := make(chan struct{})
	b.poller.Deliver = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		cur := inFlight.Add(1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		inFlight.Add(-1)
		done.Add(1)
		return events.SQSEventResponse{}, nil
	}
	stop := run(t, b.poller)
	eventually(t, 10*time.Second, "two batches in flight", func() bool { return inFlight.Load() == 2 })
	// Four more messages are visible; an unbounded poller would start them
	// within milliseconds. Watch for a while that none starts.
	watch := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(watch) {
		if inFlight.Load() > 2 {
			t.Fatalf("%d batches in flight, want at most 2", inFlight.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	eventually(t, 15*time.Second, "all messages processed", func() bool { return done.Load() == n && queueDepth(t, b.env) == 0 })
	stop()
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrency %d, want 2", p)
	}
}

// Run returns promptly when its context ends, even during a long poll.
func TestPollerStops(t *testing.T) {
	t.Parallel()
	b := setupPoller(t)
	b.poller.PollWait = 20 * time.Second
	b.poller.Deliver = func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	}
	polling := &signalSQS{PollerSQS: b.poller.SQS, receiving: make(chan struct{})}
	b.poller.SQS = polling
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.poller.Run(ctx) }()
	select {
	case <-polling.receiving:
	case <-time.After(10 * time.Second):
		t.Fatal("no ReceiveMessage within 10s")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("Run took %v to stop", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop during a 20 s long poll")
	}
}

// signalSQS closes receiving when the first ReceiveMessage starts.
type signalSQS struct {
	local.PollerSQS
	once      sync.Once
	receiving chan struct{}
}

func (s *signalSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.once.Do(func() { close(s.receiving) })
	return s.PollerSQS.ReceiveMessage(ctx, in, opts...)
}
