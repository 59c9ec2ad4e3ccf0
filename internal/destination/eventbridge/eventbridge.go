package eventbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Name is the destination's name.
const Name = "eventbridge"

// Defaults for Options.
const (
	DefaultSource     = "taskledger"
	DefaultDetailType = "taskledger.delivery"
)

// MaxEntryBytes is EventBridge's limit on one PutEvents entry.
const MaxEntryBytes = 256 << 10

// API is the part of the EventBridge client the destination uses;
// *eventbridge.Client implements it.
type API interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Options configure the destination.
type Options struct {
	// BusARN is the event bus (arn:<partition>:events:<region>:<account>:
	// event-bus/<name>); required. It is the receipt's destination identity.
	BusARN string
	// Source is every event's source; DefaultSource if empty.
	Source string
	// DetailType is every event's detail-type; DefaultDetailType if
	// empty. Params never choose it.
	DetailType string
	// Client is the EventBridge client; required.
	Client API
	// Now stamps the events; time.Now if nil.
	Now func() time.Time
}

// Destination is the EventBridge destination. It is safe for concurrent
// use.
type Destination struct {
	opts    Options
	busName string
}

// New validates opts. Errors are retrypolicy.Misconfigured.
func New(opts Options) (*Destination, error) {
	if opts.Client == nil {
		return nil, retrypolicy.Misconfigured(errors.New("eventbridge destination: no client"))
	}
	a, err := arn.Parse(opts.BusARN)
	if err != nil || a.Service != "events" || !strings.HasPrefix(a.Resource, "event-bus/") || a.Region == "" || a.AccountID == "" {
		return nil, retrypolicy.Misconfigured(fmt.Errorf("eventbridge destination: bus %q is not an event bus ARN (arn:aws:events:<region>:<account>:event-bus/<name>)", clip(opts.BusARN, 120)))
	}
	if opts.Source == "" {
		opts.Source = DefaultSource
	}
	if opts.DetailType == "" {
		opts.DetailType = DefaultDetailType
	}
	if !validDetailType(opts.Source) || !validDetailType(opts.DetailType) {
		return nil, retrypolicy.Misconfigured(errors.New("eventbridge destination: source and detail type must be 1 to 128 printable ASCII characters"))
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Destination{opts: opts, busName: strings.TrimPrefix(a.Resource, "event-bus/")}, nil
}

// Name returns "eventbridge".
func (d *Destination) Name() string { return Name }

// Guarantees: not idempotent (PutEvents has no idempotency key; the event
// id is assigned per call) and no readback (EventBridge keeps no record a
// producer can query). An uncertain outcome therefore parks.
func (d *Destination) Guarantees() destination.Guarantees {
	return destination.Guarantees{Readback: destination.ReadbackNone}
}

// Params are the destination's params: none. The detail-type is the
// destination's configuration (Options.DetailType): rules route on it, and
// a caller who could name it could dress a direct delivery as the kind of
// event only approvals are meant to produce.
type Params struct {
	// DetailType is only read to refuse it by name (errDetailTypeParam).
	DetailType *json.RawMessage `json:"detail_type"`
}

// errDetailTypeParam refuses a "detail_type" param.
var errDetailTypeParam = retrypolicy.Permanent(&destination.ParamsError{Destination: Name, Field: "detail_type",
	Problem: "is not accepted: the event's detail-type is the destination's configuration (eventbridge.detail_type in " +
		"TASKLEDGER_DESTINATIONS), never a request's; route on the detail's provenance.type instead"})

// Detail is the event's detail.
type Detail struct {
	OperationID   string `json:"operation_id"`
	PayloadSHA256 string `json:"payload_sha256"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Provenance says where the delivery came from (an approval, or a
	// direct submit).
	Provenance *destination.Provenance `json:"provenance,omitempty"`
	Payload    json.RawMessage         `json:"payload"`
}

// entryConfigCodes are per-entry error codes that configuration or
// permissions cause.
var entryConfigCodes = map[string]bool{
	"AccessDeniedException":               true,
	"NotAuthorizedForSourceException":     true,
	"NotAuthorizedForDetailTypeException": true,
	"ResourceNotFoundException":           true,
	"KMSAccessDeniedException":            true,
	"KMSDisabledException":                true,
	"KMSNotFoundException":                true,
	"KMSInvalidStateException":            true,
}

// CheckParams checks params as Deliver would (destination.ParamsChecker):
// an empty object; "detail_type" is refused by name.
func (d *Destination) CheckParams(params json.RawMessage) error {
	var p Params
	if err := destination.ParseParams(Name, params, &p); err != nil {
		return err
	}
	if p.DetailType != nil {
		return errDetailTypeParam
	}
	return nil
}

// Deliver puts one event on the bus. The SDK's retries are switched off for
// the call: a retried PutEvents after a lost reply is a second event.
//
//	accepted entry                  receipt (provider_ref: the event id)
//	entry ThrottlingException       Throttled
//	entry InternalFailure           Retryable
//	entry auth / not found / KMS    Misconfigured
//	other entry error               Permanent
//	service throttle (4xx)          Throttled
//	service auth / not found / KMS  Misconfigured
//	service 5xx, InternalException,
//	  ServiceUnavailable            Uncertain (the event may be on the bus)
//	other service 4xx               classified by pkg/retrypolicy (it refused)
//	no reply after sending          Uncertain
//	connection never made           Retryable (not sent)
func (d *Destination) Deliver(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	sum, err := req.Validate()
	if err != nil {
		return destination.Receipt{}, err
	}
	// A task recorded before detail_type was refused at submit is
	// refused here, never sent under the name it chose.
	if err := d.CheckParams(req.Params); err != nil {
		return destination.Receipt{}, err
	}
	detailType := d.opts.DetailType
	detail, err := json.Marshal(Detail{OperationID: req.OperationID, PayloadSHA256: sum, CorrelationID: req.CorrelationID, Provenance: req.Provenance, Payload: req.Payload})
	if err != nil {
		return destination.Receipt{}, retrypolicy.Permanent(fmt.Errorf("eventbridge: operation %s: encode detail: %w", req.OperationID, err))
	}
	if n := len(detail) + len(detailType) + len(d.opts.Source); n > MaxEntryBytes {
		return destination.Receipt{}, retrypolicy.Permanent(fmt.Errorf("eventbridge: operation %s: event is %d bytes, more than the %d EventBridge allows", req.OperationID, n, MaxEntryBytes))
	}
	out, err := d.opts.Client.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{{
		EventBusName: aws.String(d.busName),
		Source:       aws.String(d.opts.Source),
		DetailType:   aws.String(detailType),
		Detail:       aws.String(string(detail)),
		Time:         aws.Time(d.opts.Now()),
	}}}, func(o *eventbridge.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		return destination.Receipt{}, d.callErr(req.OperationID, err)
	}
	if len(out.Entries) != 1 {
		return destination.Receipt{}, retrypolicy.Uncertain(fmt.Errorf("eventbridge: operation %s: PutEvents answered %d entries for 1", req.OperationID, len(out.Entries)))
	}
	e := out.Entries[0]
	if code := aws.ToString(e.ErrorCode); code != "" || out.FailedEntryCount > 0 {
		return destination.Receipt{}, entryErr(req.OperationID, code, aws.ToString(e.ErrorMessage))
	}
	if aws.ToString(e.EventId) == "" {
		return destination.Receipt{}, retrypolicy.Uncertain(fmt.Errorf("eventbridge: operation %s: PutEvents answered neither an event id nor an error", req.OperationID))
	}
	return destination.Receipt{
		OperationID:         req.OperationID,
		PayloadSHA256:       sum,
		Destination:         Name,
		DestinationIdentity: d.opts.BusARN,
		ProviderRef:         aws.ToString(e.EventId),
	}, nil
}

// EntryError is a PutEvents entry the service rejected.
type EntryError struct {
	OperationID string
	Code        string
	Message     string
}

// ErrorCode is the entry's error code (an AWS error code: a
// ThrottlingException entry is a refusal, retrypolicy.Refused).
func (e *EntryError) ErrorCode() string { return e.Code }

// Error names the operation and the code (the service's message is about
// the entry's shape, never its content).
func (e *EntryError) Error() string {
	return fmt.Sprintf("eventbridge: operation %s: entry rejected: %s: %s", e.OperationID, e.Code, clip(e.Message, 200))
}

func entryErr(opID, code, msg string) error {
	if code == "" {
		code = "Unknown"
	}
	err := &EntryError{OperationID: opID, Code: code, Message: msg}
	switch {
	case code == "ThrottlingException":
		return retrypolicy.Throttled(err, 0)
	case code == "InternalFailure", code == "InternalException":
		return retrypolicy.Retryable(err)
	case entryConfigCodes[code]:
		return retrypolicy.Misconfigured(err)
	}
	return retrypolicy.Permanent(err)
}

// callErr steers an error of the PutEvents call itself. A service answer
// is a refusal only when it says so: a throttle (retried), a configuration
// or permission code (parked), a 4xx validation error (failed). A server
// fault — InternalException, InternalFailure, ServiceUnavailable, any 5xx
// answer — came after the request reached the service, which may have put
// the event: uncertain, as SES's and SNS's internal errors are (PutEvents is
// neither idempotent nor readable back, so it is never re-sent).
func (d *Destination) callErr(opID string, err error) error {
	wrapped := fmt.Errorf("eventbridge: operation %s: PutEvents: %w", opID, err)
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return destination.TransportFailure(err, wrapped)
	}
	c := retrypolicy.Classify(err)
	switch {
	case c.Throttle():
		return retrypolicy.Throttled(wrapped, c.RetryAfter)
	case entryConfigCodes[ae.ErrorCode()]:
		return retrypolicy.Misconfigured(wrapped)
	case serverFault(err, ae):
		return retrypolicy.Uncertain(wrapped)
	case c.Class == retrypolicy.PermanentInput, c.Class == retrypolicy.PermanentConfig:
		return &retrypolicy.Error{Class: c.Class, Err: wrapped}
	}
	// Another 4xx answer (a 408 request timeout): turned away; retry.
	return retrypolicy.Throttled(wrapped, c.RetryAfter)
}

// serverFaultCodes are the service errors of a call that reached
// EventBridge and failed there.
var serverFaultCodes = map[string]bool{
	"InternalException":  true,
	"InternalFailure":    true,
	"ServiceUnavailable": true,
}

// serverFault reports whether a service answer is a failure on the service's
// side: a 5xx status, a server fault the SDK models, or a server-fault code.
func serverFault(err error, ae smithy.APIError) bool {
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) && hs.HTTPStatusCode() >= 500 {
		return true
	}
	return ae.ErrorFault() == smithy.FaultServer || serverFaultCodes[ae.ErrorCode()]
}

func validDetailType(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
