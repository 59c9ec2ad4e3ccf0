package bedrock

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptrace"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Model is the configured model id (contract.Modeler).
func (p *Provider) Model() string { return p.model }

// Name is the provider's name.
const Name = "bedrock"

// DefaultTimeout bounds one Converse call when Options.Timeout is 0.
const DefaultTimeout = 2 * time.Minute

// MetadataOperationKey is the requestMetadata key that carries the operation
// id, so an operator can find the call in Bedrock's invocation logs.
const MetadataOperationKey = "taskledger_operation_id"

// Converser is the part of *bedrockruntime.Client the provider uses.
type Converser interface {
	Converse(ctx context.Context, in *bedrockruntime.ConverseInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error)
}

// Options configure a Provider.
type Options struct {
	// Model is the model id, inference profile id or ARN; required.
	Model string
	// Timeout bounds one call; DefaultTimeout if 0, none if negative.
	Timeout time.Duration
	// Clock reads Retry-After dates; time.Now if nil.
	Clock func() time.Time
}

// Provider calls Bedrock Converse. It is safe for concurrent use.
type Provider struct {
	client  Converser
	model   string
	timeout time.Duration
	now     func() time.Time
}

// New returns a Provider that calls client.
func New(client Converser, opts Options) (*Provider, error) {
	if client == nil {
		return nil, retrypolicy.Misconfigured(errors.New("bedrock: no client"))
	}
	if strings.TrimSpace(opts.Model) == "" {
		return nil, retrypolicy.Misconfigured(errors.New("bedrock: no model configured"))
	}
	p := &Provider{client: client, model: opts.Model, timeout: opts.Timeout, now: opts.Clock}
	if p.timeout == 0 {
		p.timeout = DefaultTimeout
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p, nil
}

// NewFromConfig builds the Bedrock runtime client from cfg (and optFns) and
// returns a Provider that calls it.
func NewFromConfig(cfg aws.Config, opts Options, optFns ...func(*bedrockruntime.Options)) (*Provider, error) {
	return New(bedrockruntime.NewFromConfig(cfg, optFns...), opts)
}

// CallTimeout is the bound of one Converse call (0 when none is set):
// contract.CallTimer.
func (p *Provider) CallTimeout() time.Duration { return max(p.timeout, 0) }

// Name returns "bedrock".
func (p *Provider) Name() string { return Name }

// HonoursIdempotencyKey returns false: Converse has no idempotency key.
func (p *Provider) HonoursIdempotencyKey() bool { return false }

// OffersReadback returns false (contract.ReadbackOffering): see Lookup.
func (p *Provider) OffersReadback() bool { return false }

// Lookup returns contract.ErrNoReadback: Bedrock cannot be asked whether a
// call happened.
func (p *Provider) Lookup(context.Context, string) (contract.Result, error) {
	return contract.Result{}, contract.ErrNoReadback
}

// String describes the provider.
func (p *Provider) String() string {
	return fmt.Sprintf("bedrock(model=%s timeout=%s)", p.model, p.timeout)
}

var metadataValue = regexp.MustCompile(`^[a-zA-Z0-9\s:_@$#=/+,.-]{1,256}$`)

// Generate calls Converse once (no SDK retries); see the package
// documentation for how errors are steered.
func (p *Provider) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	input, err := p.converseInput(req)
	if err != nil {
		return contract.Result{}, err
	}
	ctx, cancel, wrote := p.callContext(ctx)
	defer cancel()
	out, err := p.client.Converse(ctx, input, func(o *bedrockruntime.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		return contract.Result{}, p.steer(req.OperationID, err, wrote.Load())
	}
	return p.result(req.OperationID, out)
}

// converseInput builds the Converse request of req.
func (p *Provider) converseInput(req contract.Request) (*bedrockruntime.ConverseInput, error) {
	if req.OperationID == "" {
		return nil, retrypolicy.Permanent(errors.New("bedrock: request has no operation id"))
	}
	in, err := contract.GenerateInputOf(req)
	if err != nil {
		return nil, err
	}
	system, messages := converseMessages(in)
	input := &bedrockruntime.ConverseInput{ModelId: aws.String(p.model), Messages: messages, System: system}
	if len(req.Documents) > 0 {
		blocks, err := documentBlocks(req.Documents)
		if err != nil {
			return nil, err
		}
		// Documents first, then the turn that refers to them: the last
		// user message, the one answered.
		last := &input.Messages[len(input.Messages)-1]
		last.Content = append(blocks, last.Content...)
	}
	if in.MaxTokens > 0 || in.Temperature != nil {
		input.InferenceConfig = &types.InferenceConfiguration{}
		if in.MaxTokens > 0 {
			input.InferenceConfig.MaxTokens = aws.Int32(int32(in.MaxTokens))
		}
		if in.Temperature != nil {
			input.InferenceConfig.Temperature = aws.Float32(float32(*in.Temperature))
		}
	}
	if metadataValue.MatchString(req.OperationID) {
		input.RequestMetadata = map[string]string{MetadataOperationKey: req.OperationID}
	}
	return input, nil
}

// callContext bounds a call by the timeout and traces whether its request
// was written.
func (p *Provider) callContext(ctx context.Context) (context.Context, context.CancelFunc, *atomic.Bool) {
	cancel := context.CancelFunc(func() {})

	if p.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
	}
	wrote := &atomic.Bool{}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}})
	return ctx, cancel, wrote
}

func (p *Provider) result(opID string, out *bedrockruntime.ConverseOutput) (contract.Result, error) {
	ref, _ := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata)
	switch out.StopReason {
	case types.StopReasonGuardrailIntervened, types.StopReasonContentFiltered:
		// The model ran (and billed): no refusal (retrypolicy.ErrActed).
		return contract.Result{}, retrypolicy.Permanent(fmt.Errorf("bedrock: operation %s (request id %s): generation stopped by a content filter (stop reason %s): %w", opID, ref, out.StopReason, retrypolicy.ErrActed))
	case types.StopReasonMalformedModelOutput:
		return contract.Result{}, retrypolicy.Retryable(fmt.Errorf("bedrock: operation %s (request id %s): the model's output was malformed (stop reason %s)", opID, ref, out.StopReason))
	}
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return contract.Result{}, retrypolicy.Uncertain(fmt.Errorf("bedrock: operation %s (request id %s): response has no message", opID, ref))
	}
	var text strings.Builder
	for _, block := range msg.Value.Content {
		if t, ok := block.(*types.ContentBlockMemberText); ok {
			text.WriteString(t.Value)
		}
	}
	o := contract.GenerateOutput{Text: text.String(), Model: p.model, StopReason: string(out.StopReason)}
	if u := out.Usage; u != nil {
		o.Usage = contract.Usage{InputTokens: int(aws.ToInt32(u.InputTokens)), OutputTokens: int(aws.ToInt32(u.OutputTokens))}
	}
	raw, err := o.Marshal()
	if err != nil {
		return contract.Result{}, retrypolicy.Uncertain(fmt.Errorf("bedrock: operation %s: encode output: %w", opID, err))
	}
	res := contract.Result{Output: raw, Provider: Name, ProviderRef: ref}
	if out.Usage != nil {
		res.Usage = &o.Usage
	}
	return res, nil
}

// Error codes by what they mean for the task.
var (
	throttleCodes = map[string]bool{
		"ThrottlingException":           true,
		"ServiceQuotaExceededException": true, // Bedrock: tokens/requests per minute, "resubmit later"
		"TooManyRequestsException":      true,
	}
	retryCodes = map[string]bool{
		"ServiceUnavailableException": true,
		"InternalServerException":     true,
		"ModelNotReadyException":      true,
		"ModelTimeoutException":       true,
		"ModelStreamErrorException":   true,
		"ConflictException":           true,
	}
	configCodes = map[string]bool{
		"AccessDeniedException":       true,
		"ResourceNotFoundException":   true,
		"UnrecognizedClientException": true,
		"InvalidSignatureException":   true,
		"IncompleteSignature":         true,
		"MissingAuthenticationToken":  true,
		"ExpiredTokenException":       true,
		"InvalidClientTokenId":        true,
	}
	inputCodes = map[string]bool{
		"ValidationException":    true,
		"ModelErrorException":    true,
		"SerializationException": true,
	}
)

// modelConfigProblem matches ValidationException messages that are about
// the configured model rather than the task's input.
var modelConfigProblem = regexp.MustCompile(`(?i)model identifier|inference profile|on-demand throughput|model access|end of its life`)

func (p *Provider) steer(opID string, err error, wrote bool) error {
	wrapped := fmt.Errorf("bedrock: operation %s: %w", opID, err)
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}

	// Credentials that could not be obtained (STS, a container or
	// instance endpoint failing) mean Bedrock was never sent the request,
	// whatever status the credential source answered and whichever
	// request the trace hook saw written (the credential source's own).
	if isCredentialsFailure(err) {
		notSent := fmt.Errorf("bedrock: operation %s: %w: %w", opID, retrypolicy.ErrRequestNotSent, err)
		if status == 429 || status >= 500 {
			return retrypolicy.Retryable(notSent)
		}
		return retrypolicy.Misconfigured(notSent)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && status >= 300 {
		code := ae.ErrorCode()
		switch {
		case throttleCodes[code]:
			return retrypolicy.Throttled(wrapped, p.retryAfter(re))
		case retryCodes[code]:
			return retrypolicy.Retryable(wrapped)
		case configCodes[code]:
			return retrypolicy.Misconfigured(wrapped)
		case code == "ValidationException" && modelConfigProblem.MatchString(ae.ErrorMessage()):
			return retrypolicy.Misconfigured(wrapped)
		case inputCodes[code]:
			return retrypolicy.Permanent(wrapped)
		}
	}
	switch {
	case status == 429:
		return retrypolicy.Throttled(wrapped, p.retryAfter(re))
	case status == 504:
		// A gateway gave up waiting: Bedrock behind it may have generated.
		return retrypolicy.Uncertain(wrapped)
	case status == 408 || status >= 500:
		return retrypolicy.Retryable(wrapped)
	case status == 401 || status == 403 || status == 404:
		return retrypolicy.Misconfigured(wrapped)
	case status >= 400:
		return retrypolicy.Permanent(wrapped)
	}

	// A response (status > 0) proves the request arrived even when the
	// trace hook has not run yet: a server may answer before it has read the
	// whole body.
	if !wrote && status == 0 {
		return retrypolicy.Retryable(fmt.Errorf("bedrock: operation %s: %w: %w", opID, retrypolicy.ErrRequestNotSent, err))
	}
	// Written, and then: a timeout, a reset, or a 2xx we could not read.
	return retrypolicy.Uncertain(wrapped)
}

// isCredentialsFailure reports a failure to obtain credentials for signing.
// The SDK reports it with fmt.Errorf, so the text is all there is.
func isCredentialsFailure(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "get identity") || strings.Contains(msg, "failed to retrieve credentials")
}

func (p *Provider) retryAfter(re *awshttp.ResponseError) time.Duration {
	if re == nil || re.Response == nil {
		return 0
	}
	return retrypolicy.ParseRetryAfter(re.Response.Header.Get("Retry-After"), p.now())
}
