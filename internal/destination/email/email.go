package email

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Name is the destination's name.
const Name = "email"

// Limits of the params.
const (
	// MaxRecipients caps params.to (SES allows 50 per message).
	MaxRecipients = 50
	// MaxSubjectLen caps params.subject, in bytes.
	MaxSubjectLen = 200
)

// API is the part of the SES v2 client the destination uses;
// *sesv2.Client implements it.
type API interface {
	SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)
}

// Options configure the destination.
type Options struct {
	// From is the sender: an address (or "Name <address>") of an SES
	// identity verified for sending; required.
	From string
	// AllowedRecipients are the addresses ("ops@example.com") and domains
	// ("@example.com") deliveries may go to; at least one. Matching is
	// case-insensitive.
	AllowedRecipients []string
	// ConfigurationSet is the SES configuration set, if any.
	ConfigurationSet string
	// Client is the SES v2 client; required.
	Client API
}

// Destination is the email destination. It is safe for concurrent use.
type Destination struct {
	from      string
	identity  string // the sender's address
	addresses map[string]bool
	domains   map[string]bool
	confSet   string
	client    API
}

// New validates opts. Errors are retrypolicy.Misconfigured.
func New(opts Options) (*Destination, error) {
	if opts.Client == nil {
		return nil, misconfigured("no client")
	}
	from, err := mail.ParseAddress(opts.From)
	if err != nil {
		return nil, misconfigured("sender %q is not an email address", destination.Clip(opts.From, 120))
	}
	d := &Destination{from: from.String(), identity: from.Address, addresses: map[string]bool{}, domains: map[string]bool{}, confSet: opts.ConfigurationSet, client: opts.Client}
	for _, a := range opts.AllowedRecipients {
		a = strings.ToLower(strings.TrimSpace(a))
		switch {
		case a == "":
		case strings.HasPrefix(a, "@") && validDomain(a[1:]):
			d.domains[a[1:]] = true
		case bareAddress(a) != "":
			d.addresses[a] = true
		default:
			return nil, misconfigured("allowed recipient %q is neither an address nor @domain", destination.Clip(a, 120))
		}
	}
	if len(d.addresses)+len(d.domains) == 0 {
		return nil, misconfigured("no allowed recipients configured: list addresses or @domains")
	}
	return d, nil
}

func misconfigured(format string, args ...any) error {
	return retrypolicy.Misconfigured(fmt.Errorf("email destination: "+format, args...))
}

// bareAddress returns s lowercased when it is a plain address
// (local@domain, no display name, no angle brackets), else "".
func bareAddress(s string) string {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s || strings.ContainsAny(s, "<> \t\r\n") {
		return ""
	}
	_, domain, ok := strings.Cut(a.Address, "@")
	if !ok || !validDomain(domain) {
		return ""
	}
	return strings.ToLower(a.Address)
}

func validDomain(d string) bool {
	if d == "" || len(d) > 253 || !strings.Contains(d, ".") || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") {
		return false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Name returns "email".
func (d *Destination) Name() string { return Name }

// Guarantees: not idempotent, no readback (see the package doc).
func (d *Destination) Guarantees() destination.Guarantees {
	return destination.Guarantees{Readback: destination.ReadbackNone}
}

// Params are the email destination's params.
type Params struct {
	// To lists the recipients: 1 to MaxRecipients plain addresses, each
	// allowed by configuration.
	To []string `json:"to"`
	// Subject is the subject line (at most MaxSubjectLen bytes, one line).
	Subject string `json:"subject,omitempty"`
}

func paramsErr(field, format string, args ...any) error {
	return retrypolicy.Permanent(&destination.ParamsError{Destination: Name, Field: field, Problem: fmt.Sprintf(format, args...)})
}

// parse checks params and returns the recipients, lowercased, in order.
func (d *Destination) parse(params json.RawMessage) (Params, error) {
	var p Params
	if err := destination.ParseParams(Name, params, &p); err != nil {
		return p, err
	}
	if len(p.To) == 0 {
		return p, paramsErr("to", "is required: a list of 1 to %d addresses", MaxRecipients)
	}
	if len(p.To) > MaxRecipients {
		return p, paramsErr("to", "has %d addresses, more than the %d allowed", len(p.To), MaxRecipients)
	}
	to := make([]string, 0, len(p.To))
	for i, raw := range p.To {
		a := bareAddress(strings.TrimSpace(raw))
		if a == "" {
			return p, paramsErr(fmt.Sprintf("to[%d]", i), "is not a plain email address (local@domain, no display name)")
		}
		if !d.allowed(a) {
			// The address is the caller's own input; naming it helps them
			// and reveals nothing of the configuration beyond "not this".
			return p, paramsErr(fmt.Sprintf("to[%d]", i), "%s is not an allowed recipient of this deployment (the email destination's allowed_recipients)", destination.Clip(a, 120))
		}
		if !slices.Contains(to, a) {
			to = append(to, a)
		}
	}
	p.To = to
	if len(p.Subject) > MaxSubjectLen || strings.ContainsAny(p.Subject, "\r\n") {
		return p, paramsErr("subject", "must be one line of at most %d bytes", MaxSubjectLen)
	}
	return p, nil
}

func (d *Destination) allowed(addr string) bool {
	if d.addresses[addr] {
		return true
	}
	_, domain, _ := strings.Cut(addr, "@")
	return d.domains[domain]
}

// CheckParams checks params as Deliver would (destination.ParamsChecker):
// recipients outside the allow-list are refused here, at submit.
func (d *Destination) CheckParams(params json.RawMessage) error {
	_, err := d.parse(params)
	return err
}

// Deliver sends one email. The SDK's retries are switched off for the call:
// a retried SendEmail after a lost reply is a second email.
func (d *Destination) Deliver(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	sum, err := req.Validate()
	if err != nil {
		return destination.Receipt{}, err
	}
	p, err := d.parse(req.Params)
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
		subject = "Delivery " + req.OperationID
	}
	body := bodyText(req.Payload) + "\n\n--\noperation " + req.OperationID + "\npayload sha256 " + sum + "\nprovenance " + prov + "\n"
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(d.from),
		Destination:      &types.Destination{ToAddresses: p.To},
		Content: &types.EmailContent{Simple: &types.Message{
			Subject: &types.Content{Data: aws.String(subject), Charset: aws.String("UTF-8")},
			Body:    &types.Body{Text: &types.Content{Data: aws.String(body), Charset: aws.String("UTF-8")}},
			Headers: []types.MessageHeader{
				{Name: aws.String("X-Taskledger-Operation-Id"), Value: aws.String(req.OperationID)},
				{Name: aws.String("X-Taskledger-Payload-Sha256"), Value: aws.String(sum)},
				{Name: aws.String("X-Taskledger-Provenance"), Value: aws.String(prov)},
			},
		}},
	}
	if tag := tagValue(req.OperationID); tag != "" {
		in.EmailTags = []types.MessageTag{{Name: aws.String("operation_id"), Value: aws.String(tag)}}
	}
	if d.confSet != "" {
		in.ConfigurationSetName = aws.String(d.confSet)
	}
	out, err := d.client.SendEmail(ctx, in, func(o *sesv2.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		return destination.Receipt{}, callErr(req.OperationID, err)
	}
	id := aws.ToString(out.MessageId)
	if id == "" {
		return destination.Receipt{}, retrypolicy.Uncertain(fmt.Errorf("email: operation %s: SendEmail answered no message id", req.OperationID))
	}
	return destination.Receipt{
		OperationID:         req.OperationID,
		PayloadSHA256:       sum,
		Destination:         Name,
		DestinationIdentity: d.identity,
		ProviderRef:         id,
	}, nil
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

// tagValue returns s if it is a valid SES tag value (ASCII letters, digits,
// '_', '-', '.', '@', at most 256), else "".
func tagValue(s string) string {
	if s == "" || len(s) > 256 {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '@') {
			return ""
		}
	}
	return s
}

// SES v2 error codes of a send SES refused.
var (
	configCodes = map[string]bool{
		"MessageRejected":                    true,
		"MailFromDomainNotVerifiedException": true,
		"AccountSuspendedException":          true,
		"SendingPausedException":             true,
		"NotFoundException":                  true,
		"AccessDeniedException":              true,
		"UnrecognizedClientException":        true,
		"InvalidSignatureException":          true,
		"ExpiredTokenException":              true,
	}
	throttleCodes = map[string]bool{
		"TooManyRequestsException": true,
		"LimitExceededException":   true,
		"ThrottlingException":      true,
		"Throttling":               true,
	}
)

// callErr steers an error of the SendEmail call.
func callErr(opID string, err error) error {
	wrapped := fmt.Errorf("email: operation %s: SendEmail: %w", opID, err)
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		switch {
		case throttleCodes[code]:
			return retrypolicy.Throttled(wrapped, retrypolicy.Classify(err).RetryAfter)
		case configCodes[code]:
			return retrypolicy.Misconfigured(wrapped)
		case code == "BadRequestException":
			return retrypolicy.Permanent(wrapped)
		case ae.ErrorFault() == smithy.FaultClient:
			return retrypolicy.Misconfigured(wrapped)
		}
		// InternalServiceErrorException and other server-side failures:
		// SES may have accepted the message.
		return retrypolicy.Uncertain(wrapped)
	}
	return destination.TransportFailure(err, wrapped)
}
