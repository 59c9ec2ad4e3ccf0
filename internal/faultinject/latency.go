package faultinject

import (
	"context"
	"fmt"
	"strings"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// LatencyMiddlewareID names the latency injection on a middleware stack.
const LatencyMiddlewareID = "taskledgerLatency"

// Latency adds a fixed delay to every call of a service, modelling the
// round trip to a real AWS endpoint on top of an in-process emulator. The
// delay is added after the reply arrives and before the caller sees it, so
// a long-polling ReceiveMessage that returns as soon as a message arrives
// still costs its delay, as a real receive does. Keys are service ids as the
// SDK names them ("DynamoDB", "SQS", "S3"); a service not listed gets no
// delay. A call cancelled by its context while waiting returns the context's
// error (its reply is then as lost as a timed-out one).
type Latency map[string]time.Duration

// DefaultLatency is a realistic same-region round trip per call from a
// Lambda function: DynamoDB 5 ms, SQS 10 ms, S3 15 ms.
func DefaultLatency() Latency {
	return Latency{"DynamoDB": 5 * time.Millisecond, "SQS": 10 * time.Millisecond, "S3": 15 * time.Millisecond}
}

// Register adds the delay to a middleware stack (aws.Config.APIOptions).
// It sits in the Initialize step, outside the SDK's retry loop: one delay
// per call, whatever the attempts.
func (l Latency) Register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(LatencyMiddlewareID,
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if d := l[awsmiddleware.GetServiceID(ctx)]; d > 0 {
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return middleware.InitializeOutput{}, md, ctx.Err()
				}
			}
			return out, md, err
		}), middleware.After)
}

// ParseLatency parses "DynamoDB=5ms,SQS=10ms,S3=15ms".
func ParseLatency(spec string) (Latency, error) {
	l := Latency{}
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		svc, ds, ok := strings.Cut(item, "=")
		svc = strings.TrimSpace(svc)
		if !ok || svc == "" {
			return nil, fmt.Errorf("faultinject: latency %q: want Service=duration", item)
		}
		d, err := time.ParseDuration(strings.TrimSpace(ds))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("faultinject: latency %q: want a non-negative duration such as 5ms", item)
		}
		l[svc] = d
	}
	return l, nil
}
