package faultinject

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// MiddlewareID names the injector on a middleware stack.
const MiddlewareID = "taskledgerFaultInject"

// Kind is a kind of injected AWS fault. The empty Kind means "no fault".
type Kind string

// The kinds of fault (see the package documentation).
const (
	// Throttle rejects the call before it is sent with a throttling error.
	Throttle Kind = "throttle"
	// SendFailure rejects the call before it is sent with a 5xx server error.
	SendFailure Kind = "send_failure"
	// LostReply lets the server perform the call, then drops its reply.
	LostReply Kind = "lost_reply"
)

// Kinds returns every fault kind.
func Kinds() []Kind { return []Kind{Throttle, SendFailure, LostReply} }

// Call describes one AWS API call as a Schedule sees it.
type Call struct {
	// Service and Operation as the SDK names them ("DynamoDB", "PutItem").
	Service   string
	Operation string
	// TaskID is the task the call is about, "" when the input names none
	// (Query, ReceiveMessage, ...). See TaskIDOf.
	TaskID string
	// N is 1 for the first call with this Service, Operation and TaskID,
	// 2 for the second, and so on.
	N int
}

// Key returns "Service.Operation".
func (c Call) Key() string { return c.Service + "." + c.Operation }

// Schedule decides which fault, if any, a call gets.
type Schedule interface {
	// Decide returns the kind of fault to inject into c, or "" for none.
	Decide(c Call) Kind
}

// ScheduleFunc adapts a function to Schedule.
type ScheduleFunc func(Call) Kind

// Decide calls f.
func (f ScheduleFunc) Decide(c Call) Kind { return f(c) }

// Injector is SDK middleware that injects the faults its Schedule picks. It
// is safe for concurrent use; one Injector may be registered on several
// clients (it then counts their calls together).
type Injector struct {
	sched   Schedule
	enabled atomic.Bool

	// OnInject, if set, is called for every injected fault (after a
	// LostReply call reached the server). Set it before the first call.
	OnInject func(c Call, k Kind)
	// OnResult, if set, is called for every call that reached the server,
	// with its typed input and output (nil on error) and its error, before
	// a LostReply drops the reply. Set it before the first call.
	OnResult func(c Call, params, result any, err error)

	mu       sync.Mutex
	seen     map[callKey]int
	injected map[countKey]int
}

type callKey struct{ service, operation, task string }

type countKey struct {
	kind               Kind
	service, operation string
}

// New returns an enabled Injector following s (nil: never inject).
func New(s Schedule) *Injector {
	i := &Injector{sched: s, seen: map[callKey]int{}, injected: map[countKey]int{}}
	i.enabled.Store(true)
	return i
}

// SetEnabled turns injection on or off; calls are still numbered and
// observed while it is off.
func (i *Injector) SetEnabled(on bool) { i.enabled.Store(on) }

// Register adds the injector to a middleware stack, at the end of the
// Initialize step: after the call counter (awsclient.Counter counts the call,
// injected or not) and outside the SDK's retry loop, so an injected fault is
// what the caller sees after the SDK's bounded retries.
func (i *Injector) Register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(MiddlewareID, i.handle), middleware.After)
}

func (i *Injector) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	c := Call{
		Service:   awsmiddleware.GetServiceID(ctx),
		Operation: awsmiddleware.GetOperationName(ctx),
		TaskID:    TaskIDOf(in.Parameters),
	}
	i.mu.Lock()
	k := callKey{c.Service, c.Operation, c.TaskID}
	i.seen[k]++
	c.N = i.seen[k]
	i.mu.Unlock()

	// DynamoDB's item-size limit, which the emulators do not enforce as
	// DynamoDB does (itemsize.go), and placeholders kumo would read
	// otherwise than DynamoDB (placeholders.go): refused before sending,
	// not a fault.
	if c.Service == "DynamoDB" {
		if err := CheckItemSize(in.Parameters); err != nil {
			return middleware.InitializeOutput{}, middleware.Metadata{}, err
		}
		if err := CheckNames(in.Parameters); err != nil {
			return middleware.InitializeOutput{}, middleware.Metadata{}, err
		}
	}
	var kind Kind
	if i.sched != nil && i.enabled.Load() {
		kind = i.sched.Decide(c)
	}
	switch kind {
	case Throttle, SendFailure:
		i.record(c, kind)
		return middleware.InitializeOutput{}, middleware.Metadata{}, rejection(kind, c)
	}
	out, md, err := next.HandleInitialize(ctx, in)
	if i.OnResult != nil {
		var res any
		if err == nil {
			res = out.Result
		}
		i.OnResult(c, in.Parameters, res, err)
	}
	if kind == LostReply && err == nil {
		i.record(c, kind)
		return middleware.InitializeOutput{}, md, &LostReplyError{Call: c}
	}
	return out, md, err
}

func (i *Injector) record(c Call, k Kind) {
	i.mu.Lock()
	i.injected[countKey{k, c.Service, c.Operation}]++
	i.mu.Unlock()
	if i.OnInject != nil {
		i.OnInject(c, k)
	}
}

// Count is the number of faults of one kind injected into one operation.
type Count struct {
	Kind      Kind
	Service   string
	Operation string
	N         int
}

// Injected returns the faults injected so far, sorted by kind, service and
// operation.
func (i *Injector) Injected() []Count {
	i.mu.Lock()
	out := make([]Count, 0, len(i.injected))
	for k, n := range i.injected {
		out = append(out, Count{Kind: k.kind, Service: k.service, Operation: k.operation, N: n})
	}
	i.mu.Unlock()
	sort.Slice(out, func(a, b int) bool {
		x, y := out[a], out[b]
		if x.Kind != y.Kind {
			return x.Kind < y.Kind
		}
		if x.Service != y.Service {
			return x.Service < y.Service
		}
		return x.Operation < y.Operation
	})
	return out
}

// Total returns the number of faults of kind k injected so far.
func (i *Injector) Total(k Kind) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	n := 0
	for ck, v := range i.injected {
		if ck.kind == k {
			n += v
		}
	}
	return n
}

// InjectedError is the error of a rejected call (Throttle, SendFailure). It
// satisfies smithy.APIError with the code the real service would send.
type InjectedError struct {
	Kind Kind
	Call Call
	// Code is the AWS error code; Status the HTTP status it would carry.
	Code   string
	Status int
}

var _ smithy.APIError = (*InjectedError)(nil)

func rejection(k Kind, c Call) *InjectedError {
	e := &InjectedError{Kind: k, Call: c}
	switch {
	case k == Throttle && c.Service == "S3":
		e.Code, e.Status = "SlowDown", http.StatusServiceUnavailable
	case k == Throttle && c.Service == "SQS":
		e.Code, e.Status = "RequestThrottled", http.StatusBadRequest
	case k == Throttle:
		e.Code, e.Status = "ProvisionedThroughputExceededException", http.StatusBadRequest
	case c.Service == "DynamoDB":
		e.Code, e.Status = "InternalServerError", http.StatusInternalServerError
	default:
		e.Code, e.Status = "ServiceUnavailable", http.StatusServiceUnavailable
	}
	return e
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("faultinject: injected %s into %s (task %q, call %d): %s", e.Kind, e.Call.Key(), e.Call.TaskID, e.Call.N, e.Code)
}

// ErrorCode returns the AWS error code.
func (e *InjectedError) ErrorCode() string { return e.Code }

// ErrorMessage returns a short message.
func (e *InjectedError) ErrorMessage() string { return "injected by faultinject" }

// ErrorFault reports a server-side fault.
func (e *InjectedError) ErrorFault() smithy.ErrorFault { return smithy.FaultServer }

// HTTPStatusCode returns the HTTP status the real error would carry.
func (e *InjectedError) HTTPStatusCode() int { return e.Status }

// LostReplyError is returned for a call the server performed but whose
// reply was lost. It wraps context.DeadlineExceeded and reports Timeout().
type LostReplyError struct{ Call Call }

func (e *LostReplyError) Error() string {
	return fmt.Sprintf("faultinject: reply of %s (task %q, call %d) lost after the server performed it: %v",
		e.Call.Key(), e.Call.TaskID, e.Call.N, context.DeadlineExceeded)
}

// Unwrap returns context.DeadlineExceeded.
func (e *LostReplyError) Unwrap() error { return context.DeadlineExceeded }

// Timeout reports true, as a client timeout does.
func (e *LostReplyError) Timeout() bool { return true }
