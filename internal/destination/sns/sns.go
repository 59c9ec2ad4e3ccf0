package sns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	awssns "github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Name is the destination's name.
const Name = "sns"

// MaxSubjectLen is SNS's limit on a subject (bytes, one line).
const MaxSubjectLen = 100

// API is the part of the SNS client the destination uses; *sns.Client
// implements it.
type API interface {
	Publish(ctx context.Context, in *awssns.PublishInput, optFns ...func(*awssns.Options)) (*awssns.PublishOutput, error)
}

// Options configure the destination.
type Options struct {
	// Topics maps the names requests use to topic ARNs; at least one.
	Topics map[string]string
	// Client is the SNS client; required.
	Client API
}

// Destination is the sns destination. It is safe for concurrent use.
type Destination struct {
	topics map[string]string
	client API
}

// New validates opts. Errors are retrypolicy.Misconfigured.
func New(opts Options) (*Destination, error) {
	if opts.Client == nil {
		return nil, retrypolicy.Misconfigured(errors.New("sns: no client"))
	}
	if len(opts.Topics) == 0 {
		return nil, retrypolicy.Misconfigured(errors.New("sns: no topics configured"))
	}
	d := &Destination{topics: map[string]string{}, client: opts.Client}
	for name, a := range opts.Topics {
		if !destination.ValidName(name) {
			return nil, retrypolicy.Misconfigured(fmt.Errorf("sns: topic name %q: lowercase letters, digits, '_' or '-', starting with a letter", destination.Clip(name, 64)))
		}
		if p, err := arn.Parse(a); err != nil || p.Service != "sns" || p.Resource == "" {
			return nil, retrypolicy.Misconfigured(fmt.Errorf("sns: topic %s: %q is not an SNS topic ARN", name, destination.Clip(a, 200)))
		}
		d.topics[name] = a
	}
	return d, nil
}

// Name returns "sns".
func (d *Destination) Name() string { return Name }

// Guarantees: not idempotent, no readback (see the package doc).
func (d *Destination) Guarantees() destination.Guarantees {
	return destination.Guarantees{Readback: destination.ReadbackNone}
}

// Params are the sns destination's params.
type Params struct {
	// Topic names a configured topic.
	Topic string `json:"topic"`
	// Subject is the subject line (at most MaxSubjectLen bytes, one line).
	Subject string `json:"subject,omitempty"`
}

func paramsErr(field, format string, args ...any) error {
	return retrypolicy.Permanent(&destination.ParamsError{Destination: Name, Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (d *Destination) parse(params json.RawMessage) (Params, string, error) {
	var p Params
	if err := destination.ParseParams(Name, params, &p); err != nil {
		return p, "", err
	}
	topic, ok := d.topics[p.Topic]
	if !ok {
		names := make([]string, 0, len(d.topics))
		for n := range d.topics {
			names = append(names, n)
		}
		sort.Strings(names)
		return p, "", paramsErr("topic", "must name a configured topic (%s)", strings.Join(names, ", "))
	}
	if len(p.Subject) > MaxSubjectLen || strings.ContainsAny(p.Subject, "\r\n") {
		return p, "", paramsErr("subject", "must be one line of at most %d bytes", MaxSubjectLen)
	}
	return p, topic, nil
}

// CheckParams checks params as Deliver would (destination.ParamsChecker).
func (d *Destination) CheckParams(params json.RawMessage) error {
	_, _, err := d.parse(params)
	return err
}

// Deliver publishes one message. The SDK's retries are switched off for
// the call: a retried Publish after a lost reply is a second message.
func (d *Destination) Deliver(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	sum, err := req.Validate()
	if err != nil {
		return destination.Receipt{}, err
	}
	p, topic, err := d.parse(req.Params)
	if err != nil {
		return destination.Receipt{}, err
	}
	prov := "none"
	if req.Provenance != nil {
		if b, err := json.Marshal(req.Provenance); err == nil {
			prov = string(b)
		}
	}
	subject := p.Subject
	if subject == "" {
		subject = destination.Clip("Delivery "+req.OperationID, MaxSubjectLen)
	}
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	in := &awssns.PublishInput{
		TopicArn: aws.String(topic),
		Subject:  aws.String(subject),
		Message:  aws.String(bodyText(req.Payload) + "\n\n--\noperation " + req.OperationID + "\npayload sha256 " + sum + "\nprovenance " + prov + "\n"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"operation_id": str(req.OperationID), "payload_sha256": str(sum), "provenance": str(prov),
		},
	}
	if strings.HasSuffix(topic, ".fifo") {
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(p.Topic), aws.String(req.OperationID)
	}
	out, err := d.client.Publish(ctx, in, func(o *awssns.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		return destination.Receipt{}, callErr(req.OperationID, err)
	}
	id := aws.ToString(out.MessageId)
	if id == "" {
		return destination.Receipt{}, retrypolicy.Uncertain(fmt.Errorf("sns: operation %s: Publish answered no message id", req.OperationID))
	}
	return destination.Receipt{OperationID: req.OperationID, PayloadSHA256: sum, Destination: Name, DestinationIdentity: topic, ProviderRef: id}, nil
}

// bodyText is the payload's "text" string, else the payload as indented
// JSON.
func bodyText(payload json.RawMessage) string {
	var obj struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(payload, &obj) == nil && obj.Text != nil {
		return *obj.Text
	}
	var buf bytes.Buffer
	if json.Indent(&buf, payload, "", "  ") != nil {
		return string(payload)
	}
	return buf.String()
}

var (
	configCodes = map[string]bool{
		"NotFound": true, "NotFoundException": true, "AuthorizationError": true, "AuthorizationErrorException": true,
		"InvalidSecurity": true, "InvalidSecurityException": true, "KMSAccessDenied": true, "KMSDisabled": true,
		"KMSNotFound": true, "KMSInvalidState": true, "AccessDenied": true, "AccessDeniedException": true,
		"UnrecognizedClientException": true, "InvalidClientTokenId": true, "ExpiredToken": true, "EndpointDisabled": true,
	}
	throttleCodes = map[string]bool{"Throttled": true, "ThrottledException": true, "ThrottlingException": true, "Throttling": true, "KMSThrottling": true}
)

// callErr steers an error of the Publish call.
func callErr(opID string, err error) error {
	wrapped := fmt.Errorf("sns: operation %s: Publish: %w", opID, err)
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		switch {
		case throttleCodes[code]:
			return retrypolicy.Throttled(wrapped, retrypolicy.Classify(err).RetryAfter)
		case configCodes[code]:
			return retrypolicy.Misconfigured(wrapped)
		case strings.HasPrefix(code, "InvalidParameter"):
			return retrypolicy.Permanent(wrapped)
		case ae.ErrorFault() == smithy.FaultClient:
			return retrypolicy.Misconfigured(wrapped)
		}
		// InternalError and other server-side failures: SNS may have
		// accepted the message.
		return retrypolicy.Uncertain(wrapped)
	}
	return destination.TransportFailure(err, wrapped)
}
