package awsclient

import (
	"context"
	"sort"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/calltag"
)

// Counter counts AWS calls by service and operation. It records both logical
// calls (one per API method invocation) and attempts (one per HTTP request,
// including SDK retries), so hidden retry multiplication is visible.
type Counter struct {
	mu       sync.Mutex
	calls    map[string]int
	attempts map[string]int
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter {
	return &Counter{calls: map[string]int{}, attempts: map[string]int{}}
}

// Register adds the counter to a middleware stack; use it in Options.APIOptions
// or aws.Config.APIOptions.
func (c *Counter) Register(stack *middleware.Stack) error {
	if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("taskledgerCallCounter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.add(c.calls, key(ctx))
			return next.HandleInitialize(ctx, in)
		}), middleware.After); err != nil { // After: S3 registers its service metadata in Initialize
		return err
	}
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("taskledgerAttemptCounter",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.add(c.attempts, key(ctx))
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// StandIn is the suffix of the key of a read the ledger sends in place of
// the old item an engine omitted from a refused conditional write
// (calltag.StandIn): "DynamoDB.GetItem" + StandIn. DynamoDB returns that
// item with the refusal, so these reads are the emulator's, not the design's.
const StandIn = " (stand-in for ALL_OLD)"

func key(ctx context.Context) string {
	k := awsmiddleware.GetServiceID(ctx) + "." + awsmiddleware.GetOperationName(ctx)
	if calltag.IsStandIn(ctx) {
		k += StandIn
	}
	return k
}

func (c *Counter) add(m map[string]int, k string) {
	c.mu.Lock()
	m[k]++
	c.mu.Unlock()
}

// Calls returns a copy of the logical call counts, keyed "Service.Operation"
// (for example "DynamoDB.PutItem").
func (c *Counter) Calls() map[string]int { return c.snapshot(c.calls) }

// Attempts returns a copy of the per-attempt counts (SDK retries included).
func (c *Counter) Attempts() map[string]int { return c.snapshot(c.attempts) }

// Reset clears both counts.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.calls = map[string]int{}
	c.attempts = map[string]int{}
	c.mu.Unlock()
}

// Keys returns the sorted operation keys seen so far.
func (c *Counter) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ks := make([]string, 0, len(c.calls))
	for k := range c.calls {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (c *Counter) snapshot(m map[string]int) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
