package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/internal/deliver"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
)

// ReadbackDelay is how long after a delivery the simulated destinations
// show it to readback in the scenarios.
const ReadbackDelay = 2 * time.Second

// Destinations is the TASKLEDGER_DESTINATIONS configuration the scenarios
// run with: notify, publish and crm, every delivery accepted with its
// reply lost, visible to readback ReadbackDelay later.
var Destinations = `{"simulated":{"names":["notify","publish","crm"],"seed":1,"faults":"accept_lose_reply=1","readback_delay":"` + ReadbackDelay.String() + `"}}`

// Config parses Destinations.
func Config() deliver.Config {
	c, err := deliver.ParseConfig(Destinations)
	if err != nil {
		panic(err) // a constant
	}
	return c
}

// Target is a running stack the scenarios drive.
type Target struct {
	// URL is the HTTP API's base URL; HTTP its client (default: 10 s
	// timeout).
	URL  string
	HTTP *http.Client
	// Sims are the stack's simulated destinations: the scenarios compare
	// what the destination itself saw with what the API reports.
	Sims map[string]*dsim.Destination
	// Hold stops the worker from receiving (messages wait in the queue);
	// Release lets it receive again; Idle waits until the task queue is
	// empty with nothing in flight. Used to withdraw an approval before any
	// worker picked its deliveries up.
	Hold, Release func()
	Idle          func(ctx context.Context) error
	// Mail reads what the emulator's SES sent (SentMail); Lookup asks the
	// lambda destination's example function for its record of an
	// operation (LambdaLookup). Scenario 015 needs both.
	Mail   func(ctx context.Context) ([]Mail, error)
	Lookup func(ctx context.Context, operationID string) (found bool, receipt string, err error)
	// Run tags this run's idempotency keys (default: the start time).
	Run string
	// Poll is the GET /tasks/{id} period (default 100 ms); Timeout bounds
	// each scenario (default 60 s).
	Poll, Timeout time.Duration
	// Progress receives one line per step (nil: none).
	Progress io.Writer
}

func (t *Target) client() *client {
	hc := t.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	poll := t.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	return &client{base: t.URL, http: hc, poll: poll}
}

func (t *Target) say(format string, args ...any) {
	if t.Progress != nil {
		fmt.Fprintf(t.Progress, "  · "+format+"\n", args...)
	}
}

func (t *Target) run() string {
	if t.Run == "" {
		t.Run = strconv.FormatInt(time.Now().UnixMilli(), 36)
	}
	return t.Run
}

// QueueAttributes is the SQS call QueueIdle makes.
type QueueAttributes interface {
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// QueueIdle returns a Target.Idle for the queue at url: it polls the
// queue's approximate counts (visible, in flight, delayed) until all are
// 0 twice in a row, or ctx ends.
func QueueIdle(c QueueAttributes, url string, poll time.Duration) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		zero := 0
		for {
			out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
				sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
			}})
			if err == nil {
				n := 0
				for _, v := range out.Attributes {
					k, _ := strconv.Atoi(v)
					n += k
				}
				if n == 0 {
					zero++
				} else {
					zero = 0
				}
				if zero >= 2 {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("task queue not idle: %w", ctx.Err())
			case <-time.After(poll):
			}
		}
	}
}
