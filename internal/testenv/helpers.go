package testenv

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/payload"
)

// Clock is a settable clock for ledger.Config.Now and friends: tests move
// time on (leases, backoff, budgets) instead of sleeping. Safe for
// concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the current reading.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Buffer is a goroutine-safe bytes.Buffer for log and metrics sinks that
// handlers write to from several goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// DrainTaskIDs receives every visible message of the queue at url (hiding
// each for 5 minutes) and returns the task ids they reference, failing the
// test on a message that is not a task reference.
func (e *Env) DrainTaskIDs(t testing.TB, url string) []string {
	t.Helper()
	var ids []string
	for {
		// WaitTimeSeconds 0 would be omitted (the task queue long-polls
		// 20 s by default): wait 1 s for the last, empty receive.
		out, err := e.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10, VisibilityTimeout: 300, WaitTimeSeconds: 1,
		})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(out.Messages) == 0 {
			return ids
		}
		for _, m := range out.Messages {
			msg, err := dispatch.Parse(aws.ToString(m.Body))
			if err != nil {
				t.Fatalf("queue holds a non-task message %q", aws.ToString(m.Body))
			}
			ids = append(ids, msg.TaskID)
		}
	}
}

// WatchSKs returns the sort keys of the watch items naming task id (a
// consistent scan: a test's watch table holds few items).
func (e *Env) WatchSKs(t testing.TB, id string) []string {
	t.Helper()
	var sks []string
	p := dynamodb.NewScanPaginator(e.DDB, &dynamodb.ScanInput{
		TableName:                 &e.Names.WatchTable,
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("task_id = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: id}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("scan the watch table: %v", err)
		}
		for _, it := range page.Items {
			if sk, ok := it["sk"].(*types.AttributeValueMemberS); ok {
				sks = append(sks, sk.Value)
			}
		}
	}
	return sks
}

// Payloads returns a claim-check store on the Env's payload bucket with
// the given inline threshold (0: payload.DefaultInlineLimit).
func (e *Env) Payloads(t testing.TB, inlineLimit int) *payload.Store {
	t.Helper()
	st, err := payload.New(e.S3, e.Names.PayloadBucket, payload.Options{InlineLimit: inlineLimit})
	if err != nil {
		t.Fatalf("testenv: payload store: %v", err)
	}
	return st
}
