package soak

import (
	"context"
	"sort"
	"sync"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// latencies records the wall time of the handlers' AWS calls by operation.
type latencies struct {
	mu sync.Mutex
	by map[string][]time.Duration
}

func (l *latencies) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("soakLatency",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			start := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			d := time.Since(start)
			k := awsmiddleware.GetServiceID(ctx) + "." + awsmiddleware.GetOperationName(ctx)
			l.mu.Lock()
			if l.by == nil {
				l.by = map[string][]time.Duration{}
			}
			l.by[k] = append(l.by[k], d)
			l.mu.Unlock()
			return out, md, err
		}), middleware.Before)
}

// quantiles returns p50 and p99 per operation.
func (l *latencies) quantiles() map[string][2]time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][2]time.Duration{}
	for k, ds := range l.by {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		out[k] = [2]time.Duration{s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]}
	}
	return out
}
