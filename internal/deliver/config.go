package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	awssns "github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/email"
	"github.com/taskledger/taskledger/internal/destination/eventbridge"
	"github.com/taskledger/taskledger/internal/destination/lambda"
	"github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/destination/sns"
	"github.com/taskledger/taskledger/internal/destination/webhook"
)

// EnvVar names the environment variable holding the registry's JSON
// configuration (Config).
const EnvVar = "TASKLEDGER_DESTINATIONS"

// Config is the destination registry's configuration:
//
//	{"simulated":{"names":["notify","publish","crm"],"seed":1,
//	              "faults":"accept_lose_reply=0.1","readback_delay":"30s"},
//	 "webhooks":{"crm":{"url":"https://crm.example.com/hooks",
//	                    "secret_id":"arn:aws:secretsmanager:…",
//	                    "readback_url":"https://crm.example.com/hooks/{operation_id}"}},
//	 "eventbridge":{"bus_arn":"arn:aws:events:eu-west-1:123456789012:event-bus/taskledger"},
//	 "lambda":{"functions":{"orders":{"function":"arn:aws:lambda:eu-west-1:123456789012:function:orders",
//	                                  "lookup":true,"not_found_credible":true}}},
//	 "email":{"from":"noreply@example.com","allowed_recipients":["ops@example.com","@team.example.com"]},
//	 "sns":{"topics":{"approvals":"arn:aws:sns:eu-west-1:123456789012:approvals"}}}
//
// Every part is optional; unknown fields are errors.
type Config struct {
	Simulated   *SimulatedConfig           `json:"simulated,omitempty"`
	Webhooks    map[string]WebhookEndpoint `json:"webhooks,omitempty"`
	EventBridge *EventBridgeConfig         `json:"eventbridge,omitempty"`
	Lambda      *LambdaConfig              `json:"lambda,omitempty"`
	Email       *EmailConfig               `json:"email,omitempty"`
	SNS         *SNSConfig                 `json:"sns,omitempty"`
}

// SNSConfig names the topics the sns destination may publish to
// (sns.Options): name → topic ARN.
type SNSConfig struct {
	Topics map[string]string `json:"topics"`
}

// LambdaConfig names the functions the lambda destination may invoke.
type LambdaConfig struct {
	Functions map[string]LambdaFunction `json:"functions"`
}

// LambdaFunction is one named function (lambda.Function).
type LambdaFunction struct {
	// Function is the function's name or ARN (with an optional qualifier).
	Function         string `json:"function"`
	Lookup           bool   `json:"lookup,omitempty"`
	NotFoundCredible bool   `json:"not_found_credible,omitempty"`
	Idempotent       bool   `json:"idempotent,omitempty"`
	// Timeout is a Go duration; the destination's default if empty.
	Timeout string `json:"timeout,omitempty"`
}

// EmailConfig is the email destination's sender and allowed recipients
// (email.Options).
type EmailConfig struct {
	From              string   `json:"from"`
	AllowedRecipients []string `json:"allowed_recipients"`
	ConfigurationSet  string   `json:"configuration_set,omitempty"`
}

// SimulatedConfig registers simulated destinations (for local runs, tests
// and demos).
type SimulatedConfig struct {
	// Names are the destinations to register (default: notify, publish,
	// crm).
	Names []string `json:"names,omitempty"`
	// Seed makes faults and references reproducible.
	Seed int64 `json:"seed,omitempty"`
	// Faults is a fault plan, e.g. "accept_lose_reply=0.1,throttle=0.1".
	Faults string `json:"faults,omitempty"`
	// ReadbackDelay (a Go duration) makes deliveries visible to readback
	// only that long after they happened.
	ReadbackDelay string `json:"readback_delay,omitempty"`
	// Guarantees replaces the declared guarantees.
	Guarantees *destination.Guarantees `json:"guarantees,omitempty"`
}

// WebhookEndpoint is one named webhook endpoint (webhook.Endpoint).
type WebhookEndpoint struct {
	URL              string `json:"url"`
	SecretID         string `json:"secret_id"`
	ReadbackURL      string `json:"readback_url,omitempty"`
	NotFoundCredible bool   `json:"not_found_credible,omitempty"`
	Idempotent       bool   `json:"idempotent,omitempty"`
	// Timeout is a Go duration; the webhook's default if empty.
	Timeout string `json:"timeout,omitempty"`
}

// EventBridgeConfig is the EventBridge destination's bus.
type EventBridgeConfig struct {
	BusARN     string `json:"bus_arn"`
	Source     string `json:"source,omitempty"`
	DetailType string `json:"detail_type,omitempty"`
}

// ParseConfig reads a Config strictly; "" is the empty configuration (no
// destinations).
func ParseConfig(raw string) (Config, error) {
	var c Config
	if len(bytes.TrimSpace([]byte(raw))) == 0 {
		return c, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("deliver: %s: %w", EnvVar, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("deliver: %s: trailing data after the JSON object", EnvVar)
	}
	return c, nil
}

// WebhookSecretIDs returns the secret ids of the configured webhook
// endpoints (what the function's role may read), sorted.
func (c Config) WebhookSecretIDs() []string {
	var ids []string
	for _, ep := range c.Webhooks {
		ids = append(ids, ep.SecretID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// LambdaFunctionNames returns the function names or ARNs the lambda
// destination may invoke (what the function's role must be allowed to
// invoke), sorted.
func (c Config) LambdaFunctionNames() []string {
	if c.Lambda == nil {
		return nil
	}
	var fns []string
	for _, f := range c.Lambda.Functions {
		fns = append(fns, f.Function)
	}
	slices.Sort(fns)
	return slices.Compact(fns)
}

// Deps are the clients Build needs for the parts a Config names.
type Deps struct {
	// Secrets reads webhook signing secrets (required with webhooks).
	Secrets webhook.SecretValueGetter
	// EventBridge puts events (required with an eventbridge bus).
	EventBridge eventbridge.API
	// Lambda invokes functions (required with lambda functions).
	Lambda lambda.API
	// SES sends email (required with email).
	SES email.API
	// SNS publishes (required with sns).
	SNS sns.API
	// HTTPClient sends webhooks (optional).
	HTTPClient *http.Client
	// Now is the clock (optional).
	Now func() time.Time
}

// Registry is the configured destinations. Sims holds the simulated ones by
// name (their side-effect ledgers are what tests and the soak check).
type Registry struct {
	r    *destination.Registry
	Sims map[string]*simulated.Destination
}

// NewRegistry registers ds as they are (tests).
func NewRegistry(ds ...destination.Destination) (*Registry, error) {
	r, err := destination.NewRegistry(ds...)
	if err != nil {
		return nil, err
	}
	reg := &Registry{r: r, Sims: map[string]*simulated.Destination{}}
	for _, d := range ds {
		if s, ok := d.(*simulated.Destination); ok {
			reg.Sims[s.Name()] = s
		}
	}
	return reg, nil
}

// Names returns the registered destination names, sorted (nil-safe).
func (r *Registry) Names() []string {
	if r == nil || r.r == nil {
		return nil
	}
	return r.r.Names()
}

// Check validates a deliver input against the registry at submit: the
// destination exists and its params are valid for it. Errors are a
// *destination.InputError, *destination.UnknownDestinationError or
// *destination.ParamsError wrapped by retrypolicy.Permanent.
func (r *Registry) Check(in destination.DeliverInput) error {
	if r == nil || r.r == nil {
		return &destination.UnknownDestinationError{Name: in.Destination}
	}
	d, err := r.r.Get(in.Destination)
	if err != nil {
		return err
	}
	return destination.CheckParams(d, in.Params)
}

// Build turns c into a Registry. An empty Config is an empty registry.
func Build(c Config, deps Deps) (*Registry, error) {
	var ds []destination.Destination
	if s := c.Simulated; s != nil {
		plan, err := simulated.ParseFaultPlan(s.Faults)
		if err != nil {
			return nil, fmt.Errorf("deliver: %s simulated.faults: %w", EnvVar, err)
		}
		var delay time.Duration
		if s.ReadbackDelay != "" {
			if delay, err = time.ParseDuration(s.ReadbackDelay); err != nil || delay < 0 {
				return nil, fmt.Errorf("deliver: %s simulated.readback_delay %q: want a non-negative Go duration", EnvVar, s.ReadbackDelay)
			}
		}
		names := s.Names
		if len(names) == 0 {
			names = []string{simulated.Notify, simulated.Publish, simulated.CRM}
		}
		for _, n := range names {
			d, err := simulated.New(n, simulated.Options{Seed: s.Seed, Faults: plan, Now: deps.Now, ReadbackDelay: delay, Guarantees: s.Guarantees})
			if err != nil {
				return nil, fmt.Errorf("deliver: %s: %w", EnvVar, err)
			}
			ds = append(ds, d)
		}
	}
	if len(c.Webhooks) > 0 {
		if deps.Secrets == nil {
			return nil, fmt.Errorf("deliver: %s names webhooks but no Secrets Manager client is configured", EnvVar)
		}
		eps := map[string]webhook.Endpoint{}
		for name, ep := range c.Webhooks {
			e := webhook.Endpoint{URL: ep.URL, SecretID: ep.SecretID, ReadbackURL: ep.ReadbackURL, NotFoundCredible: ep.NotFoundCredible, Idempotent: ep.Idempotent}
			if ep.Timeout != "" {
				d, err := time.ParseDuration(ep.Timeout)
				if err != nil || d <= 0 {
					return nil, fmt.Errorf("deliver: %s webhooks.%s.timeout %q: want a positive Go duration", EnvVar, name, ep.Timeout)
				}
				e.Timeout = d
			}
			eps[name] = e
		}
		w, err := webhook.New(webhook.Options{Endpoints: eps, Secrets: webhook.SecretsManager(deps.Secrets, 0, deps.Now), HTTPClient: deps.HTTPClient, Now: deps.Now})
		if err != nil {
			return nil, fmt.Errorf("deliver: %s: %w", EnvVar, err)
		}
		ds = append(ds, w)
	}
	if b := c.EventBridge; b != nil {
		if deps.EventBridge == nil {
			return nil, fmt.Errorf("deliver: %s names an EventBridge bus but no EventBridge client is configured", EnvVar)
		}
		d, err := eventbridge.New(eventbridge.Options{BusARN: b.BusARN, Source: b.Source, DetailType: b.DetailType, Client: deps.EventBridge, Now: deps.Now})
		if err != nil {
			return nil, fmt.Errorf("deliver: %s: %w", EnvVar, err)
		}
		ds = append(ds, d)
	}
	if l := c.Lambda; l != nil {
		if deps.Lambda == nil {
			return nil, fmt.Errorf("deliver: %s names lambda functions but no Lambda client is configured", EnvVar)
		}
		fns := map[string]lambda.Function{}
		for name, f := range l.Functions {
			fn := lambda.Function{FunctionName: f.Function, Lookup: f.Lookup, NotFoundCredible: f.NotFoundCredible, Idempotent: f.Idempotent}
			if f.Timeout != "" {
				d, err := time.ParseDuration(f.Timeout)
				if err != nil || d <= 0 {
					return nil, fmt.Errorf("deliver: %s lambda.functions.%s.timeout %q: want a positive Go duration", EnvVar, name, f.Timeout)
				}
				fn.Timeout = d
			}
			fns[name] = fn
		}
		d, err := lambda.New(lambda.Options{Functions: fns, Client: deps.Lambda, Now: deps.Now})
		if err != nil {
			return nil, fmt.Errorf("deliver: %s: %w", EnvVar, err)
		}
		ds = append(ds, d)
	}
	if e := c.Email; e != nil {
		if deps.SES == nil {
			return nil, fmt.Errorf("deliver: %s names an email sender but no SES client is configured", EnvVar)
		}
		d, err := email.New(email.Options{From: e.From, AllowedRecipients: e.AllowedRecipients, ConfigurationSet: e.ConfigurationSet, Client: deps.SES})
		if err != nil {
			return nil, fmt.Errorf("deliver: %s: %w", EnvVar, err)
		}
		ds = append(ds, d)
	}
	if c.SNS != nil {
		if deps.SNS == nil {
			return nil, fmt.Errorf("deliver: %s names sns topics but no SNS client is configured", EnvVar)
		}
		d, err := sns.New(sns.Options{Topics: c.SNS.Topics, Client: deps.SNS})
		if err != nil {
			return nil, fmt.Errorf("deliver: %s: %w", EnvVar, err)
		}
		ds = append(ds, d)
	}
	return NewRegistry(ds...)
}

// BuildChecker builds a registry that can check deliver inputs (names and
// params) but never deliver or read back: its webhook secrets and
// EventBridge client refuse every call. The submit function uses it; only
// the worker and the reconciler hold the permissions to deliver.
func BuildChecker(c Config) (*Registry, error) {
	return Build(c, Deps{Secrets: refusing{}, EventBridge: refusing{}, Lambda: refusing{}, SES: refusing{}, SNS: refusing{}})
}

// refusing is a secrets, EventBridge, Lambda and SES client that refuses
// every call.
type refusing struct{}

var errChecker = errors.New("deliver: this registry only checks inputs; it does not deliver")

func (refusing) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	return nil, errChecker
}

func (refusing) PutEvents(context.Context, *awseb.PutEventsInput, ...func(*awseb.Options)) (*awseb.PutEventsOutput, error) {
	return nil, errChecker
}

func (refusing) Invoke(context.Context, *awslambda.InvokeInput, ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error) {
	return nil, errChecker
}

func (refusing) Publish(context.Context, *awssns.PublishInput, ...func(*awssns.Options)) (*awssns.PublishOutput, error) {
	return nil, errChecker
}

func (refusing) SendEmail(context.Context, *sesv2.SendEmailInput, ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
	return nil, errChecker
}
