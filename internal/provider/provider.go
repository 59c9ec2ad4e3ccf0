package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/taskledger/taskledger/internal/provider/bedrock"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/openai"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// KindGenerate is the task kind of one LLM generation.
const KindGenerate = contract.KindGenerate

type (
	// Request is one attempt at a provider operation; OperationID (the task
	// id) is the idempotency key, Attempt is for tracing only.
	Request = contract.Request
	// Document is an uploaded document of a Request (bytes, format, name).
	Document = contract.Document
	// Result is what a successful operation produced: the Output JSON saved
	// as the task result, the provider's name and its reference for the call.
	Result = contract.Result
	// Provider performs a task's side-effecting step. Generate's errors are
	// steered with the constructors of pkg/retrypolicy.
	Provider = contract.Provider
	// Looker is the optional readback: Lookup returns the result of an
	// earlier Generate, ErrNotFound (credibly never happened) or
	// ErrNoReadback (cannot tell).
	Looker = contract.Looker
	// IdempotencyHonouring is optional: HonoursIdempotencyKey is true when
	// the provider deduplicates by OperationID.
	IdempotencyHonouring = contract.IdempotencyHonouring
	// ReadbackOffering is optional: OffersReadback is false for a Looker
	// whose Lookup always answers ErrNoReadback.
	ReadbackOffering = contract.ReadbackOffering
	// CallTimer is optional: CallTimeout is the longest one call may take.
	CallTimer = contract.CallTimer
	// Streamer is optional: GenerateStream passes the text to a DeltaFunc
	// as it is generated and returns what Generate returns.
	Streamer = contract.Streamer
	// DeltaFunc receives a streamed generation's text piece by piece.
	DeltaFunc = contract.DeltaFunc
	// GenerateInput is the schema of Request.Input for kind "generate",
	// shared with the submit API's validator.
	GenerateInput = contract.GenerateInput
	// GenerateOutput is the shape of Result.Output for kind "generate".
	GenerateOutput = contract.GenerateOutput
	// Usage counts the tokens of one generation.
	Usage = contract.Usage
	// InputError is a task input that does not match the schema.
	InputError = contract.InputError
)

var (
	// ErrNotFound: the operation credibly never happened; re-sending is safe.
	ErrNotFound = contract.ErrNotFound
	// ErrNoReadback: the provider cannot tell whether the operation happened.
	ErrNoReadback = contract.ErrNoReadback
)

// ParseGenerateInput parses a "generate" task input strictly (unknown,
// duplicate or mis-cased fields rejected; limits checked). Its errors are an
// *InputError wrapped by retrypolicy.Permanent and never quote the input.
func ParseGenerateInput(raw json.RawMessage) (GenerateInput, error) {
	return contract.ParseGenerateInput(raw)
}

// SimulateNames returns the legal values of GenerateInput.Simulate.
func SimulateNames() []string { return contract.SimulateNames() }

// HonoursIdempotency reports whether p deduplicates by OperationID.
func HonoursIdempotency(p Provider) bool {
	h, ok := p.(IdempotencyHonouring)
	return ok && h.HonoursIdempotencyKey()
}

// OffersReadback reports whether p can read an operation back
// (contract.OffersReadback).
func OffersReadback(p Provider) bool { return contract.OffersReadback(p) }

// CallTimeout returns the call timeout p declares (contract.CallTimer), or
// 0 when it declares none.
func CallTimeout(p Provider) time.Duration {
	if c, ok := p.(CallTimer); ok {
		return max(c.CallTimeout(), 0)
	}
	return 0
}

// Call performs req on p: streamed through onDelta when onDelta is not nil
// and p is a Streamer, otherwise with Generate (onDelta then never hears
// of the call).
func Call(ctx context.Context, p Provider, req Request, onDelta DeltaFunc) (Result, error) {
	if s, ok := p.(Streamer); ok && onDelta != nil {
		return s.GenerateStream(ctx, req, onDelta)
	}
	return p.Generate(ctx, req)
}

// Lookup reads an operation back from p, answering ErrNoReadback when p has
// no readback.
func Lookup(ctx context.Context, p Provider, operationID string) (Result, error) {
	l, ok := p.(Looker)
	if !ok {
		return Result{}, ErrNoReadback
	}
	return l.Lookup(ctx, operationID)
}

// Provider names accepted by New.
const (
	NameSimulated = simulated.Name
	NameBedrock   = bedrock.Name
	NameOpenAI    = openai.Name
)

// DefaultAPIKeyEnv is the variable that holds the OpenAI-compatible API key
// when PROVIDER_API_KEY_ENV is not set.
const DefaultAPIKeyEnv = "OPENAI_API_KEY"

// Environment variables read by ConfigFromEnv.
const (
	EnvProvider        = "PROVIDER"
	EnvSeed            = "PROVIDER_SEED"
	EnvFaults          = "PROVIDER_FAULTS"
	EnvModel           = "PROVIDER_MODEL"
	EnvBaseURL         = "PROVIDER_BASE_URL"
	EnvAPIKeyEnv       = "PROVIDER_API_KEY_ENV"
	EnvAPIKeySecretARN = "PROVIDER_API_KEY_SECRET_ARN"
	EnvTimeout         = "PROVIDER_TIMEOUT"
	EnvSimulatedMode   = "PROVIDER_SIMULATED_MODE"
	EnvGenerationClass = "GENERATION_EFFECT_CLASS"
	// EnvSimulatedStreamMS is the simulated provider's pause before each
	// streamed chunk, in milliseconds.
	EnvSimulatedStreamMS = "PROVIDER_SIMULATED_STREAM_MS"
)

// Effect classes (GENERATION_EFFECT_CLASS; DESIGN §14): what repeating a
// generation costs.
const (
	// ClassRetrySafe (the default): only money. A lost reply, an expired
	// lease or a timeout is a bounded retry; a cancel while running ends
	// cancelled at once, the call charged.
	ClassRetrySafe = "retry-safe"
	// ClassEffect: an uncertain call may have acted and is never repeated
	// blind: read back, or parked for a person (unknown_outcome).
	ClassEffect = "effect"
)

// Simulated provider modes (PROVIDER_SIMULATED_MODE), named as the soak's:
// what a repeated operation does and whether Lookup reads back.
const (
	// ModeIdempotent (the default): a repeated operation returns the
	// recorded result; Lookup reads back by operation id.
	ModeIdempotent = "idempotent"
	// ModePlain: every call is a new generation and there is no readback,
	// as with Bedrock.
	ModePlain = "plain"
	// ModePlainReadback: every call is a new generation; Lookup reads back.
	ModePlainReadback = "plain+readback"
)

// Config selects and configures a provider. It holds the names of where
// credentials live, never a credential.
type Config struct {
	// Name is "simulated" (the default when empty), "bedrock" or "openai".
	Name string
	// Seed seeds the simulated provider.
	Seed int64
	// Faults is the simulated provider's fault plan spec, e.g.
	// "throttle=0.1,server_error=0.05" (see simulated.ParseFaultPlan).
	Faults string
	// Model is the model id; required for bedrock and openai.
	Model string
	// BaseURL is the openai API root; openai.DefaultBaseURL if empty.
	BaseURL string
	// APIKeyEnv names the variable holding the openai key; DefaultAPIKeyEnv
	// if empty.
	APIKeyEnv string
	// APIKeySecretARN, when set, is the Secrets Manager secret holding the
	// openai key (it wins over APIKeyEnv).
	APIKeySecretARN string
	// Timeout bounds one call (PROVIDER_TIMEOUT); the adapter's default if
	// 0: bedrock.DefaultTimeout and openai.DefaultTimeout (2m),
	// simulated.DefaultCallTimeout (1m). Each provider declares it
	// (CallTimeout) and the worker admits and bounds calls by it.
	Timeout time.Duration
	// AWS is the configuration for the Bedrock and Secrets Manager clients;
	// loaded with config.LoadDefaultConfig if nil.
	AWS *aws.Config
	// NoReadback makes the simulated provider answer Lookup with
	// ErrNoReadback. Set it wherever the instance is not the one the
	// workers called (a deployed reconciler Lambda: each process has its own
	// in-memory idempotency ledger, so its "not found" would be a lie and
	// would re-queue work that may have happened).
	NoReadback bool
	// SimulatedMode is the simulated provider's mode (ModeIdempotent when
	// empty; ModePlain, ModePlainReadback). Only the simulated provider
	// has one.
	SimulatedMode string
	// SimulatedStreamDelay is the simulated provider's pause before each
	// streamed chunk (PROVIDER_SIMULATED_STREAM_MS, in milliseconds; 0: no
	// pause).
	SimulatedStreamDelay time.Duration
	// SimulatedStreamGate holds the simulated provider's streamed chunks
	// until it consents (simulated.Options.StreamGate); no environment
	// variable sets it. Tests use it to hold a reply mid-stream.
	SimulatedStreamGate simulated.StreamGate
	// GenerationClass is generation's effect class: ClassRetrySafe when
	// empty, or ClassEffect for a deployment that reviews every uncertain
	// paid call. Deliveries are always effects.
	GenerationClass string

	err error // a value ConfigFromEnv could not parse
}

// ModelFromEnv reads only which provider and model the worker calls
// (PROVIDER, PROVIDER_MODEL) through getenv (os.Getenv if nil): what the
// submit function checks a task against (ModelID, AcceptsDocuments)
// without building an adapter, reading a key or a timeout. ConfigFromEnv
// reads the same two through it.
func ModelFromEnv(getenv func(string) string) Config {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		Name:  strings.ToLower(strings.TrimSpace(getenv(EnvProvider))),
		Model: strings.TrimSpace(getenv(EnvModel)),
	}
	if c.Name == "" {
		c.Name = NameSimulated
	}
	return c
}

// ConfigFromEnv reads a Config through getenv (os.Getenv if nil); see the
// package documentation for the variables. Values it cannot parse are
// reported by Validate and New.
func ConfigFromEnv(getenv func(string) string) Config {
	if getenv == nil {
		getenv = os.Getenv
	}
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	c := ModelFromEnv(getenv)
	c.Faults = get(EnvFaults)
	c.BaseURL = get(EnvBaseURL)
	c.APIKeyEnv = get(EnvAPIKeyEnv)
	c.APIKeySecretARN = get(EnvAPIKeySecretARN)
	c.SimulatedMode = strings.ToLower(get(EnvSimulatedMode))
	c.GenerationClass = strings.ToLower(get(EnvGenerationClass))
	if c.APIKeyEnv == "" {
		c.APIKeyEnv = DefaultAPIKeyEnv
	}
	var errs []error
	if v := get(EnvSeed); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: want an integer, got %q", EnvSeed, clip(v)))
		}
		c.Seed = n
	}
	if v := get(EnvSimulatedStreamMS); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 60_000 {
			errs = append(errs, fmt.Errorf("%s: want milliseconds from 0 to 60000, got %q", EnvSimulatedStreamMS, clip(v)))
		}
		c.SimulatedStreamDelay = time.Duration(n) * time.Millisecond
	}
	if v := get(EnvTimeout); v != "" {
		d, err := parseTimeout(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: want a positive duration such as 90s, got %q", EnvTimeout, clip(v)))
		}
		c.Timeout = d
	}
	c.err = errors.Join(errs...)
	return c
}

func parseTimeout(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil {
		v = strconv.Itoa(n) + "s"
	}
	d, err := time.ParseDuration(v)
	if err == nil && d <= 0 {
		err = errors.New("not positive")
	}
	return d, err
}

func clip(s string) string {
	if len(s) > 40 {
		return strings.ToValidUTF8(s[:40], "") + "…"
	}
	return s
}

// RetrySafeGeneration reports whether generation is retry-safe (the
// default) rather than an effect: what the worker's and the reconciler's
// RetrySafeGeneration are set from.
func (c Config) RetrySafeGeneration() bool { return c.GenerationClass != ClassEffect }

// ModelID is the model id the configured adapter calls: Model, or for the
// simulated provider simulated.DefaultModel when Model is empty (bedrock
// and openai require one, see Validate). Admission limits and prices are
// keyed by it.
func (c Config) ModelID() string {
	if c.Model == "" && c.name() == NameSimulated {
		return simulated.DefaultModel
	}
	return c.Model
}

// AcceptsDocuments reports whether the configured adapter takes a request
// with documents (each adapter's AcceptsDocuments constant): the openai
// adapter refuses them (openai.ErrDocumentsUnsupported), so the submit
// function refuses such a task up front. An unknown name answers false
// (Validate rejects it anyway).
func (c Config) AcceptsDocuments() bool {
	switch c.name() {
	case NameSimulated:
		return simulated.AcceptsDocuments
	case NameBedrock:
		return bedrock.AcceptsDocuments
	case NameOpenAI:
		return openai.AcceptsDocuments
	}
	return false
}

// name is Name lower-cased, NameSimulated when empty.
func (c Config) name() string {
	if c.Name == "" {
		return NameSimulated
	}
	return strings.ToLower(c.Name)
}

// String describes the configuration; it holds no secret.
func (c Config) String() string {
	class := c.GenerationClass
	if class == "" {
		class = ClassRetrySafe
	}
	return c.describe() + " generation=" + class
}

func (c Config) describe() string {
	name := c.Name
	if name == "" {
		name = NameSimulated
	}
	switch name {
	case NameSimulated:
		mode := c.SimulatedMode
		if mode == "" {
			mode = ModeIdempotent
		}
		return fmt.Sprintf("provider=%s mode=%s seed=%d faults=%q", name, mode, c.Seed, c.Faults)
	case NameOpenAI:
		key := "env:" + c.APIKeyEnv
		if c.APIKeySecretARN != "" {
			key = "secretsmanager:" + c.APIKeySecretARN
		}
		return fmt.Sprintf("provider=%s model=%s base_url=%s key=%s timeout=%s", name, c.Model, c.BaseURL, key, c.Timeout)
	}
	return fmt.Sprintf("provider=%s model=%s timeout=%s", name, c.Model, c.Timeout)
}

// Validate reports what New would reject without building anything: values
// ConfigFromEnv could not parse, an unknown name, a bad fault plan, a
// missing model. Its errors are retrypolicy.Misconfigured.
func (c Config) Validate() error {
	var errs []error
	if c.err != nil {
		errs = append(errs, c.err)
	}
	switch strings.ToLower(c.Name) {
	case "", NameSimulated:
		if _, err := simulated.ParseFaultPlan(c.Faults); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvFaults, err))
		}
		switch c.SimulatedMode {
		case "", ModeIdempotent, ModePlain, ModePlainReadback:
		default:
			errs = append(errs, fmt.Errorf("%s: unknown mode %q (want %s, %s or %s)", EnvSimulatedMode, clip(c.SimulatedMode), ModeIdempotent, ModePlain, ModePlainReadback))
		}
	case NameBedrock, NameOpenAI:
		if c.SimulatedMode != "" {
			errs = append(errs, fmt.Errorf("%s is a setting of the simulated provider, not of %s", EnvSimulatedMode, c.Name))
		}
		if c.SimulatedStreamDelay != 0 {
			errs = append(errs, fmt.Errorf("%s is a setting of the simulated provider, not of %s", EnvSimulatedStreamMS, c.Name))
		}
		if c.SimulatedStreamGate != nil {
			errs = append(errs, fmt.Errorf("a stream gate is a setting of the simulated provider, not of %s", c.Name))
		}
		if c.Model == "" {
			errs = append(errs, fmt.Errorf("%s is required for provider %s", EnvModel, c.Name))
		}
	default:
		errs = append(errs, fmt.Errorf("%s: unknown provider %q (want %s, %s or %s)", EnvProvider, clip(c.Name), NameSimulated, NameBedrock, NameOpenAI))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%s: negative timeout", EnvTimeout))
	}
	switch c.GenerationClass {
	case "", ClassRetrySafe, ClassEffect:
	default:
		errs = append(errs, fmt.Errorf("%s: unknown effect class %q (want %s or %s)", EnvGenerationClass, clip(c.GenerationClass), ClassRetrySafe, ClassEffect))
	}
	if len(errs) == 0 {
		return nil
	}
	return retrypolicy.Misconfigured(fmt.Errorf("provider config: %w", errors.Join(errs...)))
}

// New builds the provider cfg names. For openai with a key from the
// environment it checks that the variable is set; a Secrets Manager key is
// read on first use. Errors are retrypolicy.Misconfigured.
func New(ctx context.Context, cfg Config) (Provider, error) {
	return newWithEnv(ctx, cfg, os.Getenv)
}

func newWithEnv(ctx context.Context, cfg Config, getenv func(string) string) (Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if strings.ToLower(cfg.Name) != NameOpenAI {
		return newKeyless(ctx, cfg)
	}
	var key openai.KeySource
	if cfg.APIKeySecretARN != "" {
		awsCfg, err := awsConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		key = openai.SecretsManagerKey(secretsmanager.NewFromConfig(awsCfg), cfg.APIKeySecretARN, 0)
	} else {
		name := cfg.APIKeyEnv
		if name == "" {
			name = DefaultAPIKeyEnv
		}
		key = openai.EnvKey(name, getenv)
		if _, err := key.APIKey(ctx); err != nil {
			return nil, err
		}
	}
	p, err := openai.New(openai.Options{BaseURL: cfg.BaseURL, Model: cfg.Model, Key: key, Timeout: cfg.Timeout})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// newKeyless builds the adapters that need no API key (bedrock: the
// function's role; simulated). cfg is validated.
func newKeyless(ctx context.Context, cfg Config) (Provider, error) {
	if strings.ToLower(cfg.Name) == NameBedrock {
		awsCfg, err := awsConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		p, err := bedrock.NewFromConfig(awsCfg, bedrock.Options{Model: cfg.Model, Timeout: cfg.Timeout})
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	plan, _ := simulated.ParseFaultPlan(cfg.Faults) // validated by the caller
	return simulated.New(simulated.Options{Seed: cfg.Seed, Faults: plan, Model: cfg.Model, CallTimeout: cfg.Timeout,
		NoIdempotency:    cfg.SimulatedMode == ModePlain || cfg.SimulatedMode == ModePlainReadback,
		NoReadback:       cfg.NoReadback || cfg.SimulatedMode == ModePlain,
		StreamChunkDelay: cfg.SimulatedStreamDelay, StreamGate: cfg.SimulatedStreamGate}), nil
}

// NewReadback builds the provider the reconciler holds to read unknown
// outcomes back (Lookup): the adapter cfg names, with New's name and
// guarantees, but it never reads an API key. No adapter that needs a key
// (openai) has a readback, so the reconciler never calls such a provider
// and its role holds no secretsmanager:GetSecretValue; Generate on the
// openai adapter built here fails as Misconfigured without a request.
func NewReadback(ctx context.Context, cfg Config) (Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if strings.ToLower(cfg.Name) != NameOpenAI {
		return newKeyless(ctx, cfg)
	}
	p, err := openai.New(openai.Options{BaseURL: cfg.BaseURL, Model: cfg.Model, Key: readbackOnly{}, Timeout: cfg.Timeout})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// readbackOnly is the key source of NewReadback's openai adapter.
type readbackOnly struct{}

func (readbackOnly) APIKey(context.Context) (string, error) {
	return "", retrypolicy.Misconfigured(errors.New("provider: this instance only reads back (the reconciler's); it holds no API key"))
}

func awsConfig(ctx context.Context, cfg Config) (aws.Config, error) {
	if cfg.AWS != nil {
		return *cfg.AWS, nil
	}
	c, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, retrypolicy.Misconfigured(fmt.Errorf("provider %s: load AWS config: %w", cfg.Name, err))
	}
	return c, nil
}
