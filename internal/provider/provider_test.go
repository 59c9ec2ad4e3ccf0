package provider

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/taskledger/taskledger/internal/provider/bedrock"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/openai"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigFromEnvDefaults(t *testing.T) {
	t.Parallel()
	c := ConfigFromEnv(env(nil))
	if c.Name != "simulated" || c.APIKeyEnv != "OPENAI_API_KEY" || c.Seed != 0 || c.Timeout != 0 || c.Faults != "" || c.AWS != nil {
		t.Fatalf("defaults %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestConfigFromEnvReadsEverything(t *testing.T) {
	t.Parallel()
	c := ConfigFromEnv(env(map[string]string{
		"PROVIDER":                    " OpenAI ",
		"PROVIDER_SEED":               "-42",
		"PROVIDER_FAULTS":             "throttle=0.1",
		"PROVIDER_MODEL":              "gpt-4o-mini",
		"PROVIDER_BASE_URL":           "http://127.0.0.1:8080/v1",
		"PROVIDER_API_KEY_ENV":        "LLM_KEY",
		"PROVIDER_API_KEY_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:llm",
		"PROVIDER_TIMEOUT":            "90",
	}))
	want := Config{Name: "openai", Seed: -42, Faults: "throttle=0.1", Model: "gpt-4o-mini", BaseURL: "http://127.0.0.1:8080/v1",
		APIKeyEnv: "LLM_KEY", APIKeySecretARN: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:llm", Timeout: 90 * time.Second}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	if d := ConfigFromEnv(env(map[string]string{"PROVIDER_TIMEOUT": "1m30s"})).Timeout; d != 90*time.Second {
		t.Errorf("PROVIDER_TIMEOUT=1m30s gave %v", d)
	}
	if s := c.String(); !strings.Contains(s, "secretsmanager:arn:aws:secretsmanager") || !strings.Contains(s, "gpt-4o-mini") {
		t.Errorf("String() = %q", s)
	}
}

func TestInvalidConfigIsMisconfigured(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		env  map[string]string
		want string
	}{
		"seed":          {map[string]string{"PROVIDER_SEED": "abc"}, "PROVIDER_SEED"},
		"timeout":       {map[string]string{"PROVIDER_TIMEOUT": "soon"}, "PROVIDER_TIMEOUT"},
		"zero timeout":  {map[string]string{"PROVIDER_TIMEOUT": "0"}, "PROVIDER_TIMEOUT"},
		"name":          {map[string]string{"PROVIDER": "gemini"}, `unknown provider "gemini"`},
		"faults":        {map[string]string{"PROVIDER_FAULTS": "throttle=2"}, "PROVIDER_FAULTS"},
		"bedrock model": {map[string]string{"PROVIDER": "bedrock"}, "PROVIDER_MODEL is required"},
		"openai model":  {map[string]string{"PROVIDER": "openai"}, "PROVIDER_MODEL is required"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := ConfigFromEnv(env(tc.env))
			p, err := New(t.Context(), cfg)
			if p != nil || retrypolicy.Classify(err).Class != retrypolicy.PermanentConfig || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want permanent_config mentioning %q", p, err, tc.want)
			}
		})
	}
}

func TestNewSimulated(t *testing.T) {
	t.Parallel()
	p, err := New(t.Context(), ConfigFromEnv(env(map[string]string{"PROVIDER_SEED": "9", "PROVIDER_FAULTS": "server_error=1"})))
	if err != nil {
		t.Fatal(err)
	}
	sim, ok := p.(*simulated.Provider)
	if !ok || p.Name() != "simulated" {
		t.Fatalf("New gave %T %q", p, p.Name())
	}
	_, err = p.Generate(t.Context(), Request{OperationID: "op", Attempt: 1, Kind: KindGenerate, Input: json.RawMessage(`{"prompt":"x"}`)})
	if retrypolicy.Classify(err).Class != retrypolicy.Transient {
		t.Fatalf("fault plan not applied: %v", err)
	}
	if !HonoursIdempotency(p) {
		t.Error("HonoursIdempotency(simulated) = false")
	}
	if _, err := Lookup(t.Context(), p, "op"); !errors.Is(err, ErrNotFound) || sim.Calls("op") != 1 {
		t.Errorf("Lookup = %v (calls %d), want ErrNotFound", err, sim.Calls("op"))
	}
}

func TestNewOpenAI(t *testing.T) {
	t.Parallel()
	cfg := ConfigFromEnv(env(map[string]string{"PROVIDER": "openai", "PROVIDER_MODEL": "m", "PROVIDER_API_KEY_ENV": "LLM_KEY"}))
	if _, err := newWithEnv(t.Context(), cfg, env(nil)); retrypolicy.Classify(err).Class != retrypolicy.PermanentConfig || !strings.Contains(err.Error(), "LLM_KEY") {
		t.Fatalf("missing key: %v, want permanent_config naming LLM_KEY", err)
	}
	p, err := newWithEnv(t.Context(), cfg, env(map[string]string{"LLM_KEY": "sk-abc"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(*openai.Provider); !ok || HonoursIdempotency(p) {
		t.Fatalf("New gave %T, idempotent %v", p, HonoursIdempotency(p))
	}
	if _, err := Lookup(t.Context(), p, "op"); !errors.Is(err, ErrNoReadback) {
		t.Errorf("Lookup = %v, want ErrNoReadback", err)
	}

	// A secret is read on first use, not by New: an unreachable endpoint is fine here.
	cfg.APIKeySecretARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:k"
	cfg.AWS = &aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1"),
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
	if _, err := newWithEnv(t.Context(), cfg, env(nil)); err != nil {
		t.Fatalf("secret-sourced key: %v", err)
	}
}

func TestNewBedrock(t *testing.T) {
	t.Parallel()
	cfg := Config{Name: "bedrock", Model: "anthropic.claude-3-haiku-20240307-v1:0", AWS: &aws.Config{Region: "us-east-1"}}
	p, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(*bedrock.Provider); !ok || HonoursIdempotency(p) {
		t.Fatalf("New gave %T, idempotent %v", p, HonoursIdempotency(p))
	}
}

type noReadback struct{}

func (noReadback) Name() string { return "x" }
func (noReadback) Generate(context.Context, Request) (Result, error) {
	return Result{}, nil
}

func TestHelpersWithoutOptionalInterfaces(t *testing.T) {
	t.Parallel()
	if HonoursIdempotency(noReadback{}) {
		t.Error("HonoursIdempotency without the interface = true")
	}
	if _, err := Lookup(t.Context(), noReadback{}, "op"); !errors.Is(err, ErrNoReadback) {
		t.Errorf("Lookup without Looker = %v", err)
	}
}

func TestAliasesAreTheContract(t *testing.T) {
	t.Parallel()
	if ErrNotFound != contract.ErrNotFound || ErrNoReadback != contract.ErrNoReadback {
		t.Fatal("re-exported errors differ")
	}
	var _ contract.Provider = Provider(nil)
	in, err := ParseGenerateInput(json.RawMessage(`{"prompt":"p","simulate":"throttle"}`))
	if err != nil || in.Simulate != "throttle" {
		t.Fatalf("ParseGenerateInput = %+v, %v", in, err)
	}
	_, err = ParseGenerateInput(json.RawMessage(`{"prompt":"p","extra":1}`))
	var ie *InputError
	if !errors.As(err, &ie) || retrypolicy.Classify(err).Class != retrypolicy.PermanentInput {
		t.Fatalf("unknown field: %v", err)
	}
	if len(SimulateNames()) != len(simulated.Faults()) {
		t.Fatal("SimulateNames and simulated.Faults differ")
	}
}

func TestNewSimulatedNoReadback(t *testing.T) {
	t.Parallel()
	p, err := New(context.Background(), Config{Name: NameSimulated, NoReadback: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lookup(context.Background(), p, "t_never"); !errors.Is(err, ErrNoReadback) {
		t.Fatalf("Lookup with NoReadback = %v, want ErrNoReadback", err)
	}
	q, _ := New(context.Background(), Config{Name: NameSimulated})
	if _, err := Lookup(context.Background(), q, "t_never"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Lookup on a shared instance = %v, want ErrNotFound", err)
	}
}

// NewReadback (the reconciler's provider) builds every adapter without an
// API key: openai with neither a key variable nor a secret, the same name
// and guarantees as New's, Lookup is ErrNoReadback, and Generate is
// refused as Misconfigured without a request.
func TestNewReadbackHoldsNoKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := Config{Name: NameOpenAI, Model: "m", BaseURL: "http://127.0.0.1:1/v1", APIKeyEnv: "TASKLEDGER_TEST_NO_SUCH_KEY_VARIABLE",
		APIKeySecretARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:never-read"}
	p, err := NewReadback(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	full, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != full.Name() || HonoursIdempotency(p) != HonoursIdempotency(full) {
		t.Errorf("readback provider %s/%v differs from %s/%v", p.Name(), HonoursIdempotency(p), full.Name(), HonoursIdempotency(full))
	}
	if _, err := Lookup(ctx, p, "op"); !errors.Is(err, ErrNoReadback) {
		t.Errorf("Lookup = %v, want ErrNoReadback", err)
	}
	_, err = p.Generate(ctx, contract.Request{OperationID: "op", Input: json.RawMessage(`{"prompt":"x"}`)})
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.PermanentConfig {
		t.Errorf("Generate = %v (%v), want a Misconfigured refusal", err, c.Class)
	}
	for _, name := range []string{NameSimulated, NameBedrock} {
		if p, err := NewReadback(ctx, Config{Name: name, Model: "m", NoReadback: true, AWS: &aws.Config{Region: "us-east-1"}}); err != nil || p.Name() == "" {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := NewReadback(ctx, Config{Name: "nonsense"}); err == nil {
		t.Error("an unknown provider was accepted")
	}
}

// TestModelFromEnvReadsOnlyTheModel: the submit function's read names the
// provider and model and nothing else (no key, no timeout), and
// ConfigFromEnv agrees with it.
func TestModelFromEnvReadsOnlyTheModel(t *testing.T) {
	t.Parallel()
	all := map[string]string{"PROVIDER": " OpenAI ", "PROVIDER_MODEL": " gpt-x ", "PROVIDER_API_KEY_SECRET_ARN": "arn:x", "PROVIDER_TIMEOUT": "9s", "PROVIDER_BASE_URL": "http://h"}
	var read []string
	c := ModelFromEnv(func(k string) string { read = append(read, k); return all[k] })
	if c.Name != NameOpenAI || c.Model != "gpt-x" || c.APIKeySecretARN != "" || c.Timeout != 0 || c.BaseURL != "" {
		t.Fatalf("ModelFromEnv = %+v", c)
	}
	if strings.Join(read, ",") != "PROVIDER,PROVIDER_MODEL" {
		t.Fatalf("ModelFromEnv read %v, want PROVIDER and PROVIDER_MODEL only", read)
	}
	if f := ConfigFromEnv(env(all)); f.Name != c.Name || f.Model != c.Model || f.ModelID() != c.ModelID() {
		t.Fatalf("ConfigFromEnv %+v disagrees with ModelFromEnv %+v", f, c)
	}
	if got := ModelFromEnv(env(nil)); got.Name != NameSimulated || got.ModelID() != simulated.DefaultModel {
		t.Fatalf("defaults: %+v (model %q)", got, got.ModelID())
	}
	if got := (Config{Name: NameSimulated, Model: "sim-2"}).ModelID(); got != "sim-2" {
		t.Fatalf("ModelID = %q, want the configured model", got)
	}
}

// TestAcceptsDocumentsMatchesTheAdapters: what the submit function is
// told (Config.AcceptsDocuments) is what the adapter does with a request
// that carries a document: simulated reads it, openai refuses it without
// a request (ErrDocumentsUnsupported, permanent_input).
func TestAcceptsDocumentsMatchesTheAdapters(t *testing.T) {
	t.Parallel()
	req := Request{OperationID: "op-docs", Attempt: 1, Kind: KindGenerate, Input: json.RawMessage(`{"prompt":"x"}`),
		Documents: []Document{{Name: "document-1", Format: "txt", ContentType: "text/plain", Bytes: []byte("hello")}}}

	sim := ConfigFromEnv(env(nil))
	if !sim.AcceptsDocuments() {
		t.Fatal("simulated: AcceptsDocuments = false")
	}
	p, err := New(t.Context(), sim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Generate(t.Context(), req); err != nil {
		t.Fatalf("simulated refused a document it is said to accept: %v", err)
	}

	oai := ConfigFromEnv(env(map[string]string{"PROVIDER": "openai", "PROVIDER_MODEL": "m", "PROVIDER_BASE_URL": "http://127.0.0.1:1"}))
	if oai.AcceptsDocuments() {
		t.Fatal("openai: AcceptsDocuments = true")
	}
	p, err = newWithEnv(t.Context(), oai, env(map[string]string{DefaultAPIKeyEnv: "sk-test"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Generate(t.Context(), req)
	if !errors.Is(err, openai.ErrDocumentsUnsupported) || retrypolicy.Classify(err).Class != retrypolicy.PermanentInput {
		t.Fatalf("openai with a document: %v, want ErrDocumentsUnsupported (permanent_input)", err)
	}

	if !(Config{Name: NameBedrock, Model: "m"}).AcceptsDocuments() {
		t.Error("bedrock: AcceptsDocuments = false")
	}
	if (Config{Name: "nope"}).AcceptsDocuments() {
		t.Error("an unknown provider is said to accept documents")
	}
}
