package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Name is the destination's name.
const Name = "lambda"

// The actions of the invoke event.
const (
	ActionDeliver = "deliver"
	ActionLookup  = "lookup"
)

// The errorType values a function raises to say it did not act.
const (
	// ErrorTypeRejected: the function refuses the delivery for good (the
	// request is at fault) and did not act.
	ErrorTypeRejected = "Rejected"
	// ErrorTypeRetryable: the function did not act and the delivery may be
	// tried again later.
	ErrorTypeRetryable = "Retryable"
)

// DefaultTimeout bounds one invoke when a function sets none.
const DefaultTimeout = 60 * time.Second

// maxRefBytes bounds the receipt kept as provider_ref.
const maxRefBytes = 256

// API is the part of the Lambda client the destination uses;
// *lambda.Client implements it.
type API interface {
	Invoke(ctx context.Context, in *awslambda.InvokeInput, optFns ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error)
}

// Function is one configured receiving function. Requests name it; they
// never carry a function name or ARN.
type Function struct {
	// FunctionName is the function's name, ARN or partial ARN (with an
	// optional ":alias" or ":version" suffix); required.
	FunctionName string
	// Lookup: the function answers {"action":"lookup"} events, so an
	// uncertain delivery is read back by operation id.
	Lookup bool
	// NotFoundCredible: the function records the operation atomically with
	// its effect and reads it back consistently, so its "not found" proves
	// the delivery never happened.
	NotFoundCredible bool
	// Idempotent: the function's owners promise it acts at most once per
	// operation id, so an uncertain delivery may be re-sent without proof.
	Idempotent bool
	// Timeout bounds one invoke; DefaultTimeout if 0.
	Timeout time.Duration
}

// Options configure the destination.
type Options struct {
	// Functions maps function names (destination-name syntax) to
	// functions; at least one.
	Functions map[string]Function
	// Client invokes the functions; required.
	Client API
	// Now stamps readbacks; time.Now if nil.
	Now func() time.Time
}

// Destination is the lambda destination. It is safe for concurrent use.
type Destination struct {
	functions map[string]function
	client    API
	now       func() time.Time
}

type function struct {
	Function
	name string
}

// New validates opts. Errors are retrypolicy.Misconfigured and name the
// function and the rule.
func New(opts Options) (*Destination, error) {
	if opts.Client == nil {
		return nil, retrypolicy.Misconfigured(errors.New("lambda destination: no client"))
	}
	if len(opts.Functions) == 0 {
		return nil, retrypolicy.Misconfigured(errors.New("lambda destination: no functions configured"))
	}
	d := &Destination{functions: map[string]function{}, client: opts.Client, now: opts.Now}
	if d.now == nil {
		d.now = time.Now
	}
	var errs []error
	for name, fn := range opts.Functions {
		switch {
		case !destination.ValidName(name):
			errs = append(errs, fmt.Errorf("lambda destination: function name %q: lowercase letters, digits, '_' or '-', starting with a letter", destination.Clip(name, 40)))
			continue
		case !validFunctionName(fn.FunctionName):
			errs = append(errs, fmt.Errorf("lambda destination: function %s: %q is not a function name or ARN", name, destination.Clip(fn.FunctionName, 140)))
			continue
		case fn.Timeout < 0:
			errs = append(errs, fmt.Errorf("lambda destination: function %s: negative timeout", name))
			continue
		case fn.NotFoundCredible && !fn.Lookup:
			errs = append(errs, fmt.Errorf("lambda destination: function %s: not_found_credible needs lookup", name))
			continue
		}
		if fn.Timeout == 0 {
			fn.Timeout = DefaultTimeout
		}
		d.functions[name] = function{Function: fn, name: name}
	}
	if len(errs) > 0 {
		return nil, retrypolicy.Misconfigured(errors.Join(errs...))
	}
	return d, nil
}

// validFunctionName accepts what Invoke's FunctionName accepts, roughly:
// a name, a partial ARN (account:function:name) or an ARN, with an
// optional qualifier; no spaces, at most 170 characters.
func validFunctionName(s string) bool {
	if s == "" || len(s) > 170 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ':' || c == '.' || c == '$') {
			return false
		}
	}
	return true
}

// Name returns "lambda".
func (d *Destination) Name() string { return Name }

// Guarantees are the promises made without knowing the function: none.
// GuaranteesFor gives a function's.
func (d *Destination) Guarantees() destination.Guarantees { return destination.Guarantees{} }

// Params are the lambda destination's params.
type Params struct {
	// Function names a configured function.
	Function string `json:"function"`
	// Args is an optional JSON object for the function; it reaches the
	// function inside the event's params.
	Args json.RawMessage `json:"args,omitempty"`
}

func paramsErr(field, problem string) error {
	return retrypolicy.Permanent(&destination.ParamsError{Destination: Name, Field: field, Problem: problem})
}

func (d *Destination) functionOf(params json.RawMessage) (function, error) {
	var p Params
	if err := destination.ParseParams(Name, params, &p); err != nil {
		return function{}, err
	}
	if p.Function == "" {
		return function{}, paramsErr("function", "is required")
	}
	if a := bytes.TrimSpace(p.Args); len(a) > 0 && a[0] != '{' {
		return function{}, paramsErr("args", "must be a JSON object")
	}
	fn, ok := d.functions[p.Function]
	if !ok {
		names := make([]string, 0, len(d.functions))
		for n := range d.functions {
			names = append(names, n)
		}
		slices.Sort(names)
		return function{}, paramsErr("function", fmt.Sprintf("no function %q is configured (configured: %s)", destination.Clip(p.Function, 40), strings.Join(names, ", ")))
	}
	return fn, nil
}

// CheckParams checks params as Deliver would (destination.ParamsChecker).
func (d *Destination) CheckParams(params json.RawMessage) error {
	_, err := d.functionOf(params)
	return err
}

// GuaranteesFor returns the guarantees of the function params names:
// readback by operation id when it answers lookups, its NotFoundCredible
// and Idempotent settings.
func (d *Destination) GuaranteesFor(params json.RawMessage) (destination.Guarantees, error) {
	fn, err := d.functionOf(params)
	if err != nil {
		return destination.Guarantees{}, err
	}
	g := destination.Guarantees{Idempotent: fn.Idempotent, Readback: destination.ReadbackNone}
	if fn.Lookup {
		g.Readback = destination.ReadbackByOperationID
		g.NotFoundCredible = fn.NotFoundCredible
	}
	return g, nil
}

// Event is the JSON event a function receives.
type Event struct {
	// Action is ActionDeliver or ActionLookup.
	Action string `json:"action"`
	// OperationID is the deliver task's id: the function acts at most once
	// per operation id.
	OperationID string `json:"operation_id"`
	// Attempt is the attempt number, for tracing only (deliver).
	Attempt int `json:"attempt,omitempty"`
	// PayloadSHA256 is the lowercase hex SHA-256 of Payload's bytes
	// (deliver).
	PayloadSHA256 string `json:"payload_sha256,omitempty"`
	// CorrelationID is the caller's correlation id, if any.
	CorrelationID string `json:"correlation_id,omitempty"`
	// Provenance says where the delivery came from (deliver).
	Provenance *destination.Provenance `json:"provenance,omitempty"`
	// Params are the delivery's params as submitted (deliver).
	Params json.RawMessage `json:"params,omitempty"`
	// Payload is the delivered JSON object, exactly as submitted (deliver).
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Reply is what a function answers: Receipt to a delivery, Found (and the
// Receipt) to a lookup.
type Reply struct {
	Receipt string `json:"receipt"`
	Found   *bool  `json:"found,omitempty"`
}

// FunctionError is the error payload Lambda returns when a function fails
// ({"errorType":"…","errorMessage":"…"}).
type FunctionError struct {
	// Function is the configured function's name.
	Function string
	// OperationID is the delivery's.
	OperationID string
	// Kind is Lambda's X-Amz-Function-Error ("Unhandled", "Handled"), or
	// "Returned" for an error object returned as the reply.
	Kind string
	// Type is the errorType the function or its runtime reported.
	Type string
	// Message is the errorMessage, clipped. It is the function's text, so
	// it is kept out of Error().
	Message string
}

// Error names the function, the operation and the error type.
func (e *FunctionError) Error() string {
	return fmt.Sprintf("lambda: function %s: operation %s: function error %s (errorType %q)", e.Function, e.OperationID, e.Kind, destination.Clip(e.Type, 80))
}

// Deliver invokes the function params names with a deliver event and reads
// its receipt; see the package doc for how each outcome is steered.
func (d *Destination) Deliver(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	sum, err := req.Validate()
	if err != nil {
		return destination.Receipt{}, err
	}
	fn, err := d.functionOf(req.Params)
	if err != nil {
		return destination.Receipt{}, err
	}
	ev, err := encodeEvent(Event{Action: ActionDeliver, OperationID: req.OperationID, Attempt: req.Attempt, PayloadSHA256: sum,
		CorrelationID: req.CorrelationID, Provenance: req.Provenance, Params: req.Params, Payload: req.Payload})
	if err != nil {
		return destination.Receipt{}, retrypolicy.Permanent(fmt.Errorf("lambda: operation %s: encode event: %w", req.OperationID, err))
	}
	out, err := d.invoke(ctx, fn, ev)
	if err != nil {
		return destination.Receipt{}, callErr(fn.name, req.OperationID, err)
	}
	if fe := functionErr(fn.name, req.OperationID, out); fe != nil {
		switch fe.Type {
		case ErrorTypeRejected:
			return destination.Receipt{}, retrypolicy.Permanent(fe)
		case ErrorTypeRetryable:
			return destination.Receipt{}, retrypolicy.Retryable(fe)
		}
		// A crash, a timeout, an error of another type: the function may
		// have acted before it failed.
		return destination.Receipt{}, retrypolicy.Uncertain(fe)
	}
	var r Reply
	if json.Unmarshal(out.Payload, &r) != nil || strings.TrimSpace(r.Receipt) == "" {
		return destination.Receipt{}, retrypolicy.Uncertain(fmt.Errorf("lambda: function %s: operation %s: the function returned without a receipt (%d bytes; want {\"receipt\":\"…\"}): it may have acted", fn.name, req.OperationID, len(out.Payload)))
	}
	return destination.Receipt{
		OperationID:         req.OperationID,
		PayloadSHA256:       sum,
		Destination:         Name,
		DestinationIdentity: fn.FunctionName,
		ProviderRef:         destination.Clip(r.Receipt, maxRefBytes),
	}, nil
}

// Lookup invokes the function with {"action":"lookup","operation_id":…}:
// {"found":true,"receipt":…} → the receipt with ReadbackResult "found";
// {"found":false} → destination.ErrNotFound; a function without lookup →
// destination.ErrNoReadback. Any other answer or failure is a failed
// lookup, steered Retryable (a lookup is safe to repeat) or Misconfigured,
// never Uncertain.
func (d *Destination) Lookup(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	sum, err := req.Validate()
	if err != nil {
		return destination.Receipt{}, err
	}
	fn, err := d.functionOf(req.Params)
	if err != nil {
		return destination.Receipt{}, err
	}
	if !fn.Lookup {
		return destination.Receipt{}, destination.ErrNoReadback
	}
	ev, err := json.Marshal(Event{Action: ActionLookup, OperationID: req.OperationID, CorrelationID: req.CorrelationID})
	if err != nil {
		return destination.Receipt{}, retrypolicy.Permanent(fmt.Errorf("lambda: operation %s: encode lookup: %w", req.OperationID, err))
	}
	now := d.now()
	out, err := d.invoke(ctx, fn, ev)
	if err != nil {
		err = callErr(fn.name, req.OperationID, err)
		if c := retrypolicy.Classify(err).Class; c == retrypolicy.PermanentConfig {
			return destination.Receipt{}, err
		}
		return destination.Receipt{}, retrypolicy.Retryable(fmt.Errorf("lambda: lookup: %w", err))
	}
	if fe := functionErr(fn.name, req.OperationID, out); fe != nil {
		return destination.Receipt{}, retrypolicy.Retryable(fmt.Errorf("lambda: lookup: %w", fe))
	}
	var r Reply
	if json.Unmarshal(out.Payload, &r) != nil || r.Found == nil {
		return destination.Receipt{}, retrypolicy.Misconfigured(fmt.Errorf("lambda: function %s: lookup of %s: the reply is not {\"found\":true|false,…} (%d bytes)", fn.name, req.OperationID, len(out.Payload)))
	}
	if !*r.Found {
		return destination.Receipt{}, fmt.Errorf("lambda: function %s: lookup of %s: %w", fn.name, req.OperationID, destination.ErrNotFound)
	}
	return destination.Receipt{
		OperationID:         req.OperationID,
		PayloadSHA256:       sum,
		Destination:         Name,
		DestinationIdentity: fn.FunctionName,
		ProviderRef:         destination.Clip(r.Receipt, maxRefBytes),
		ReadbackAt:          now.UTC(),
		ReadbackResult:      destination.ReadbackFound,
	}, nil
}

// encodeEvent encodes ev with the payload's exact bytes (json.Marshal would
// compact them), so payload_sha256 is the hash of the bytes the function
// receives.
func encodeEvent(ev Event) ([]byte, error) {
	payload := ev.Payload
	ev.Payload = nil
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	if len(payload) == 0 {
		return b, nil
	}
	out := make([]byte, 0, len(b)+len(payload)+12)
	out = append(out, b[:len(b)-1]...)
	out = append(out, `,"payload":`...)
	out = append(out, payload...)
	return append(out, '}'), nil
}

// invoke calls the function synchronously with the SDK's retries off.
func (d *Destination) invoke(ctx context.Context, fn function, event []byte) (*awslambda.InvokeOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, fn.Timeout)
	defer cancel()
	return d.client.Invoke(ctx, &awslambda.InvokeInput{
		FunctionName:   aws.String(fn.FunctionName),
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        event,
	}, func(o *awslambda.Options) { o.Retryer = aws.NopRetryer{} })
}

// functionErr returns the function's error, or nil when it returned a
// reply. A function error is Lambda's X-Amz-Function-Error, or a reply that
// is an error object ({"errorType":…} without a "receipt"): a function may
// return one in so many words, and the Runtime Interface Emulator answers
// a function's error so, without the header.
func functionErr(fn, opID string, out *awslambda.InvokeOutput) *FunctionError {
	var p struct {
		Type    *string `json:"errorType"`
		Message string  `json:"errorMessage"`
		Receipt *string `json:"receipt"`
	}
	_ = json.Unmarshal(out.Payload, &p)
	kind := aws.ToString(out.FunctionError)
	if kind == "" {
		if p.Type == nil || p.Receipt != nil {
			return nil
		}
		kind = "Returned"
	}
	return &FunctionError{Function: fn, OperationID: opID, Kind: kind, Type: aws.ToString(p.Type), Message: destination.Clip(p.Message, 500)}
}

// Lambda error codes of an invoke Lambda refused before the function ran.
var (
	// retryCodes: try again later.
	retryCodes = map[string]bool{
		"EC2ThrottledException":                true,
		"ENILimitReachedException":             true,
		"ENINotReadyException":                 true,
		"ResourceNotReadyException":            true,
		"ResourceConflictException":            true,
		"SnapStartNotReadyException":           true,
		"SubnetIPAddressLimitReachedException": true,
		"EFSMountConnectivityException":        true,
		"EFSMountTimeoutException":             true,
	}
	// configCodes: the function, its permissions or its setup are wrong.
	configCodes = map[string]bool{
		"ResourceNotFoundException":                     true,
		"AccessDeniedException":                         true,
		"UnrecognizedClientException":                   true,
		"InvalidSignatureException":                     true,
		"ExpiredTokenException":                         true,
		"InvalidParameterValueException":                true,
		"EC2AccessDeniedException":                      true,
		"EC2UnexpectedException":                        true,
		"EFSMountFailureException":                      true,
		"InvalidRuntimeException":                       true,
		"InvalidSecurityGroupIDException":               true,
		"InvalidSubnetIDException":                      true,
		"InvalidZipFileException":                       true,
		"KMSAccessDeniedException":                      true,
		"KMSDisabledException":                          true,
		"KMSInvalidStateException":                      true,
		"KMSNotFoundException":                          true,
		"SnapStartException":                            true,
		"SnapStartTimeoutException":                     true,
		"RecursiveInvocationException":                  true,
		"CodeVerificationFailedException":               true,
		"InvalidCodeSignatureException":                 true,
		"UnsupportedMediaTypeException":                 true,
		"ProvisionedConcurrencyConfigNotFoundException": true,
	}
	// inputCodes: this event can never be invoked.
	inputCodes = map[string]bool{
		"RequestTooLargeException":                 true,
		"InvalidRequestContentException":           true,
		"SerializedRequestEntityTooLargeException": true,
	}
)

// callErr steers an error of the Invoke call itself.
func callErr(fn, opID string, err error) error {
	wrapped := fmt.Errorf("lambda: function %s: operation %s: Invoke: %w", fn, opID, err)
	var tm *types.TooManyRequestsException
	if errors.As(err, &tm) {
		var after time.Duration
		if s, perr := strconv.Atoi(aws.ToString(tm.RetryAfterSeconds)); perr == nil && s > 0 {
			after = time.Duration(s) * time.Second
		}
		return retrypolicy.Throttled(wrapped, after)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		switch {
		case retrypolicy.Classify(err).Throttle():
			return retrypolicy.Throttled(wrapped, retrypolicy.Classify(err).RetryAfter)
		case retryCodes[code]:
			return retrypolicy.Retryable(wrapped)
		case configCodes[code]:
			return retrypolicy.Misconfigured(wrapped)
		case inputCodes[code]:
			return retrypolicy.Permanent(wrapped)
		case ae.ErrorFault() == smithy.FaultClient:
			return retrypolicy.Misconfigured(wrapped)
		}
		// ServiceException and any other server-side failure: Lambda may
		// have run the function before it failed.
		return retrypolicy.Uncertain(wrapped)
	}
	return destination.TransportFailure(err, wrapped)
}
