package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/stack"
)

// Defaults of the Poller's optional fields.
const (
	// DefaultPollWait is the long-poll wait of one ReceiveMessage, the one
	// the Lambda event source mapping uses (and SQS's maximum).
	DefaultPollWait = 20 * time.Second
	// DefaultBatchSize is SAM's default BatchSize for an SQS event.
	DefaultBatchSize = 10
	// DefaultMaxConcurrency bounds the batches in flight when the template
	// sets no ScalingConfig.MaximumConcurrency.
	DefaultMaxConcurrency = 5
	// DefaultFunctionTimeout is SAM's default function Timeout.
	DefaultFunctionTimeout = 3 * time.Second
	// DefaultShutdownGrace is how long in-flight invocations may run on
	// after Run's context ends before their contexts are cancelled too.
	DefaultShutdownGrace = 5 * time.Second
)

// maxReceive is the most messages one ReceiveMessage returns.
const maxReceive = 10

// PollerSQS is the part of the SQS client the poller calls: it receives and
// deletes, as the event source mapping does (the function itself only
// changes visibility).
type PollerSQS interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// SQSDeliver is an SQS-triggered function: worker.Handler.Handle.
type SQSDeliver func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// Poller emulates a Lambda SQS event source mapping: it long-polls a queue,
// gathers batches, invokes Deliver with a Lambda-like context and deletes
// what the invocation acknowledged. See the package documentation for the
// semantics. Fill the fields (MappingPoller does most of it from the
// template), then call Run.
type Poller struct {
	// SQS, QueueURL and QueueARN name the queue (required: SQS, QueueURL).
	// QueueARN and Region are copied into each record's eventSourceARN and
	// awsRegion.
	SQS      PollerSQS
	QueueURL string
	QueueARN string
	Region   string

	// BatchSize is the most records per invocation (DefaultBatchSize).
	BatchSize int
	// MaxBatchingWindow is how long to keep gathering records after the
	// first one arrived, while the batch is not full (0: one receive).
	MaxBatchingWindow time.Duration
	// ReportBatchItemFailures: the response's BatchItemFailures name the
	// records to keep; the others are deleted. Without it a successful
	// invocation deletes the whole batch.
	ReportBatchItemFailures bool
	// MaxConcurrency bounds the invocations in flight
	// (DefaultMaxConcurrency).
	MaxConcurrency int
	// PollWait is the long-poll wait of one receive (DefaultPollWait).
	PollWait time.Duration
	// Timeout is the function's timeout: each invocation's context has
	// this deadline (DefaultFunctionTimeout).
	Timeout time.Duration
	// ShutdownGrace is how long in-flight invocations may continue after
	// Run's context ends before their contexts are cancelled
	// (DefaultShutdownGrace).
	ShutdownGrace time.Duration
	// FunctionName names the function in the invoked ARN of the Lambda
	// context ("" → "function").
	FunctionName string

	// Deliver is the function (required).
	Deliver SQSDeliver
	// OnBatch, if set, is called after each invocation and its deletes.
	OnBatch func(BatchReport)
	// Log receives receive/delete errors (default: discard).
	Log *slog.Logger
}

// BatchReport describes one invocation.
type BatchReport struct {
	RequestID string
	Records   int
	// ItemFailures are the records the function asked to keep.
	ItemFailures int
	// Deleted counts the records deleted after the invocation.
	Deleted int
	// Err is the invocation's error (the function failed or panicked):
	// nothing was deleted.
	Err      error
	Duration time.Duration
}

// MappingPoller returns a Poller configured like the event source mapping
// m of a function with the given timeout; set SQS, QueueURL, QueueARN,
// Region and Deliver before Run.
func MappingPoller(m stack.EventSourceMapping, fn stack.Function) *Poller {
	return &Poller{
		BatchSize:               m.BatchSize,
		MaxBatchingWindow:       m.MaxBatchingWindow,
		ReportBatchItemFailures: m.ReportBatchItemFailures,
		MaxConcurrency:          m.MaxConcurrency,
		Timeout:                 fn.Timeout,
		FunctionName:            m.Function,
	}
}

func (p *Poller) batchSize() int {
	if p.BatchSize > 0 {
		return p.BatchSize
	}
	return DefaultBatchSize
}

func (p *Poller) concurrency() int {
	if p.MaxConcurrency > 0 {
		return p.MaxConcurrency
	}
	return DefaultMaxConcurrency
}

func (p *Poller) pollWait() time.Duration {
	if p.PollWait > 0 {
		return p.PollWait
	}
	return DefaultPollWait
}

func (p *Poller) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultFunctionTimeout
}

func (p *Poller) grace() time.Duration {
	if p.ShutdownGrace > 0 {
		return p.ShutdownGrace
	}
	return DefaultShutdownGrace
}

func (p *Poller) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return logging.Discard()
}

// Run polls until ctx ends, then waits for the invocations in flight (whose
// contexts are cancelled ShutdownGrace after ctx ends) and returns nil.
// It returns an error at once only when the Poller is misconfigured.
func (p *Poller) Run(ctx context.Context) error {
	if p.SQS == nil || p.QueueURL == "" || p.Deliver == nil {
		return errors.New("local: Poller needs SQS, QueueURL and Deliver")
	}
	// Invocations outlive ctx by at most the grace period.
	inv, cancelInv := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelInv()
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.NewTimer(p.grace())
		defer t.Stop()
		select {
		case <-t.C:
			cancelInv()
		case <-inv.Done():
		}
	})
	defer stopGrace()

	slots := make(chan struct{}, p.concurrency())
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := 100 * time.Millisecond
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		msgs, err := p.collect(ctx)
		if ctx.Err() != nil {
			<-slots
			// A batch received as ctx ended is not invoked: it becomes
			// visible again after its visibility timeout, as with a
			// poller that stopped.
			return nil
		}
		if err != nil {
			<-slots
			p.log().Warn("local: sqs receive failed", "queue", p.QueueURL, "error", err.Error())
			if !sleep(ctx, backoff) {
				return nil
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if len(msgs) == 0 {
			<-slots
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			p.invoke(inv, msgs)
		}()
	}
}

// collect receives one batch: a long poll for the first records, then,
// within MaxBatchingWindow, more receives until the batch is full.
func (p *Poller) collect(ctx context.Context) ([]sqstypes.Message, error) {
	size := p.batchSize()
	msgs, err := p.receive(ctx, min(size, maxReceive), p.pollWait())
	if err != nil || len(msgs) == 0 || p.MaxBatchingWindow <= 0 {
		return msgs, err
	}
	deadline := time.Now().Add(p.MaxBatchingWindow)
	for len(msgs) < size {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		more, err := p.receive(ctx, min(size-len(msgs), maxReceive), left)
		if err != nil {
			// Keep what we have: those records are in flight already.
			p.log().Warn("local: sqs receive failed while batching", "queue", p.QueueURL, "error", err.Error())
			break
		}
		msgs = append(msgs, more...)
	}
	return msgs, nil
}

func (p *Poller) receive(ctx context.Context, n int, wait time.Duration) ([]sqstypes.Message, error) {
	secs := int32((wait + time.Second - 1) / time.Second) // SQS waits in whole seconds
	secs = min(max(secs, 0), 20)
	out, err := p.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    &p.QueueURL,
		MaxNumberOfMessages:         int32(n),
		WaitTimeSeconds:             secs,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// invoke runs one batch through Deliver and deletes what it acknowledged.
func (p *Poller) invoke(ctx context.Context, msgs []sqstypes.Message) {
	start := time.Now()
	rep := BatchReport{RequestID: newRequestID(), Records: len(msgs)}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		ev.Records[i] = p.record(m)
	}

	ictx, cancel := context.WithTimeout(ctx, p.timeout())
	fn := p.FunctionName
	if fn == "" {
		fn = "function"
	}
	ictx = lambdacontext.NewContext(ictx, &lambdacontext.LambdaContext{
		AwsRequestID:       rep.RequestID,
		InvokedFunctionArn: fmt.Sprintf("arn:aws:lambda:%s:000000000000:function:%s", p.region(), fn),
	})
	resp, err := p.call(ictx, ev)
	cancel()
	if err == nil {
		// An invocation that ran past its timeout failed, whatever it
		// returned, as in Lambda.
		err = context.Cause(ictx)
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			err = nil // our own cancel() above
		}
	}

	var del []sqstypes.Message
	switch {
	case err != nil:
		rep.Err = err
	case !p.ReportBatchItemFailures:
		del = msgs
	default:
		keep, ok := failedIDs(resp, msgs)
		if !ok {
			// An unknown or empty identifier fails the whole batch.
			rep.Err = errors.New("local: batch item failure names no record of the batch")
			rep.ItemFailures = len(msgs)
			break
		}
		rep.ItemFailures = len(keep)
		for _, m := range msgs {
			if !keep[aws.ToString(m.MessageId)] {
				del = append(del, m)
			}
		}
	}
	rep.Deleted = p.delete(ctx, del)
	rep.Duration = time.Since(start)
	if p.OnBatch != nil {
		p.OnBatch(rep)
	}
}

// call invokes Deliver, turning a panic into a function error.
func (p *Poller) call(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("local: function panicked: %v", r)
		}
	}()
	return p.Deliver(ctx, ev)
}

// failedIDs returns the message ids a response asks to keep, and false if
// any identifier is empty or not in the batch.
func failedIDs(resp events.SQSEventResponse, msgs []sqstypes.Message) (map[string]bool, bool) {
	in := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		in[aws.ToString(m.MessageId)] = true
	}
	keep := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		if f.ItemIdentifier == "" || !in[f.ItemIdentifier] {
			return nil, false
		}
		keep[f.ItemIdentifier] = true
	}
	return keep, true
}

// delete deletes msgs in batches of ten and returns how many were deleted.
// A message whose delete failed comes back after its visibility timeout,
// which the function must tolerate anyway (at-least-once delivery).
func (p *Poller) delete(ctx context.Context, msgs []sqstypes.Message) int {
	n := 0
	for len(msgs) > 0 {
		chunk := msgs[:min(len(msgs), maxReceive)]
		msgs = msgs[len(chunk):]
		in := &sqs.DeleteMessageBatchInput{QueueUrl: &p.QueueURL}
		for i, m := range chunk {
			in.Entries = append(in.Entries, sqstypes.DeleteMessageBatchRequestEntry{
				Id:            aws.String(strconv.Itoa(i)),
				ReceiptHandle: m.ReceiptHandle,
			})
		}
		out, err := p.SQS.DeleteMessageBatch(ctx, in)
		if err != nil {
			p.log().Warn("local: sqs delete failed", "queue", p.QueueURL, "messages", len(chunk), "error", err.Error())
			continue
		}
		n += len(out.Successful)
		for _, f := range out.Failed {
			p.log().Warn("local: sqs delete failed", "queue", p.QueueURL, "code", aws.ToString(f.Code), "message", aws.ToString(f.Message))
		}
	}
	return n
}

func (p *Poller) region() string {
	if p.Region != "" {
		return p.Region
	}
	return "us-east-1"
}

// record converts a received message into the event record Lambda builds.
func (p *Poller) record(m sqstypes.Message) events.SQSMessage {
	r := events.SQSMessage{
		MessageId:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes:             map[string]string{},
		MessageAttributes:      map[string]events.SQSMessageAttribute{},
		EventSourceARN:         p.QueueARN,
		EventSource:            "aws:sqs",
		AWSRegion:              p.region(),
	}
	for k, v := range m.Attributes {
		r.Attributes[k] = v
	}
	for k, v := range m.MessageAttributes {
		r.MessageAttributes[k] = events.SQSMessageAttribute{
			StringValue:      v.StringValue,
			BinaryValue:      v.BinaryValue,
			StringListValues: append([]string{}, v.StringListValues...),
			BinaryListValues: append([][]byte{}, v.BinaryListValues...),
			DataType:         aws.ToString(v.DataType),
		}
	}
	return r
}

// newRequestID returns a random UUID-shaped request id.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
