package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/taskledger/taskledger/internal/stack"
)

// ScheduleDeliver is a schedule-triggered function; ev is the EventBridge
// Scheduler payload. reconciler.Handler.Handle fits once its Summary is
// dropped.
type ScheduleDeliver func(ctx context.Context, ev json.RawMessage) error

// Ticker emulates an EventBridge Scheduler rate(...) schedule: it invokes
// Deliver every Every with a Scheduler-shaped event and a Lambda-like
// context. Runs never overlap: a tick that falls while the previous run is
// still going is dropped (the next one comes a period later).
type Ticker struct {
	// Every is the period (required, > 0).
	Every time.Duration
	// RunAtStart invokes once as soon as Run starts.
	RunAtStart bool
	// Timeout is the function's timeout: the deadline of each invocation's
	// context (DefaultFunctionTimeout).
	Timeout time.Duration
	// FunctionName and ScheduleName appear in the event and the Lambda
	// context; Region in the event.
	FunctionName string
	ScheduleName string
	Region       string
	// ShutdownGrace is how long a run in flight may continue after Run's
	// context ends (DefaultShutdownGrace).
	ShutdownGrace time.Duration

	// Deliver is the function (required).
	Deliver ScheduleDeliver
	// OnRun, if set, is called after each invocation.
	OnRun func(RunReport)
}

// RunReport describes one scheduled invocation.
type RunReport struct {
	RequestID string
	Scheduled time.Time
	Err       error
	Duration  time.Duration
}

// ScheduleTicker returns a Ticker for the schedule s of a function fn;
// set Deliver before Run. It fails for schedules that are not rate(...).
func ScheduleTicker(s stack.Schedule, fn stack.Function) (*Ticker, error) {
	if s.Every <= 0 {
		return nil, fmt.Errorf("local: schedule %q of %s is not a rate(...) expression", s.Expression, s.Function)
	}
	return &Ticker{
		Every:        s.Every,
		RunAtStart:   true,
		Timeout:      fn.Timeout,
		FunctionName: s.Function,
		ScheduleName: "taskledger-local-" + s.Function,
	}, nil
}

// Run invokes Deliver on the schedule until ctx ends, then waits for a run
// in flight (cancelled ShutdownGrace after ctx ends) and returns nil. It
// returns an error at once only when the Ticker is misconfigured.
func (t *Ticker) Run(ctx context.Context) error {
	if t.Every <= 0 || t.Deliver == nil {
		return errors.New("local: Ticker needs Every > 0 and Deliver")
	}
	inv, cancelInv := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelInv()
	grace := t.ShutdownGrace
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	stop := context.AfterFunc(ctx, func() {
		tm := time.NewTimer(grace)
		defer tm.Stop()
		select {
		case <-tm.C:
			cancelInv()
		case <-inv.Done():
		}
	})
	defer stop()

	if t.RunAtStart {
		t.invoke(inv, time.Now())
	}
	tick := time.NewTicker(t.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case at := <-tick.C:
			if ctx.Err() != nil {
				return nil
			}
			t.invoke(inv, at)
		}
	}
}

// Event returns the EventBridge Scheduler payload for a run scheduled at
// at (the shape of events/scheduler-tick.json).
func (t *Ticker) Event(at time.Time) json.RawMessage {
	region := t.Region
	if region == "" {
		region = "us-east-1"
	}
	name := t.ScheduleName
	if name == "" {
		name = "taskledger-local"
	}
	b, _ := json.Marshal(map[string]any{
		"version":     "0",
		"id":          newRequestID(),
		"detail-type": "Scheduled Event",
		"source":      "aws.scheduler",
		"account":     "000000000000",
		"time":        at.UTC().Truncate(time.Second).Format(time.RFC3339),
		"region":      region,
		"resources":   []string{fmt.Sprintf("arn:aws:scheduler:%s:000000000000:schedule/default/%s", region, name)},
		"detail":      "{}",
	})
	return b
}

func (t *Ticker) invoke(ctx context.Context, at time.Time) {
	start := time.Now()
	rep := RunReport{RequestID: newRequestID(), Scheduled: at}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultFunctionTimeout
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fn := t.FunctionName
	if fn == "" {
		fn = "function"
	}
	region := t.Region
	if region == "" {
		region = "us-east-1"
	}
	ictx = lambdacontext.NewContext(ictx, &lambdacontext.LambdaContext{
		AwsRequestID:       rep.RequestID,
		InvokedFunctionArn: fmt.Sprintf("arn:aws:lambda:%s:000000000000:function:%s", region, fn),
	})
	func() {
		defer func() {
			if r := recover(); r != nil {
				rep.Err = fmt.Errorf("local: function panicked: %v", r)
			}
		}()
		rep.Err = t.Deliver(ictx, t.Event(at))
	}()
	rep.Duration = time.Since(start)
	if t.OnRun != nil {
		t.OnRun(rep)
	}
}
