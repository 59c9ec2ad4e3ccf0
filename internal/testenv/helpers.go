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

// DayMargin is how close to a UTC midnight ClockStart never starts a
// clock: a test may move its clock on by less than DayMargin without
// leaving the UTC day it started in.
const DayMargin = 2 * time.Hour

// ClockStart returns where a test Clock that reads about the real time
// starts, given the real time now: now (UTC, to the millisecond), or, when
// the next UTC midnight is less than DayMargin away, now + DayMargin, past
// that midnight. A daily quota counts per UTC day, so a test that moves its
// clock across midnight would find its calls in the next day's count.
//
// Forward, never back: kumo deletes items whose expires_at is before the
// real time, every 30 s, so a clock behind the real time would have
// short-lived items (an admission window's, an hour past its window) gone
// mid-test. Ahead, what a test writes with a TTL outlives it.
func ClockStart(now time.Time) time.Time {
	now = now.UTC().Truncate(time.Millisecond)
	if NextUTCDay(now).Sub(now) < DayMargin {
		return now.Add(DayMargin)
	}
	return now
}

// NextUTCDay returns 00:00 UTC of the day after now's: the base of a test
// clock pinned to a time of day (a quota's last minute, a whole minute for
// an admission window) that is still ahead of the real time, so kumo's TTL
// deletion (by the real time) leaves what the test writes alone. A fixed
// date soon lies in the past, and then a quota or admission window item
// can vanish between two steps of the test.
func NextUTCDay(now time.Time) time.Time {
	now = now.UTC()
	return time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
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
