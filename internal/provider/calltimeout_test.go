package provider

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/taskledger/taskledger/internal/provider/bedrock"
	"github.com/taskledger/taskledger/internal/provider/openai"
	"github.com/taskledger/taskledger/internal/provider/simulated"
)

// TestEveryProviderDeclaresItsCallTimeout: each adapter declares the bound
// the worker admits and enforces calls by — its default, or PROVIDER_TIMEOUT.
func TestEveryProviderDeclaresItsCallTimeout(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{"LLM_KEY": "sk-abc"})
	base := map[string]Config{
		NameSimulated: {Name: NameSimulated},
		NameBedrock:   {Name: NameBedrock, Model: "m", AWS: &aws.Config{Region: "us-east-1"}},
		NameOpenAI:    {Name: NameOpenAI, Model: "m", APIKeyEnv: "LLM_KEY"},
	}
	defaults := map[string]time.Duration{
		NameSimulated: simulated.DefaultCallTimeout,
		NameBedrock:   bedrock.DefaultTimeout,
		NameOpenAI:    openai.DefaultTimeout,
	}
	for name, cfg := range base {
		t.Run(name, func(t *testing.T) {
			p, err := newWithEnv(t.Context(), cfg, getenv)
			if err != nil {
				t.Fatal(err)
			}
			if got := CallTimeout(p); got != defaults[name] || got <= 0 {
				t.Errorf("default CallTimeout = %v, want %v", got, defaults[name])
			}
			cfg.Timeout = 17 * time.Second
			if p, err = newWithEnv(t.Context(), cfg, getenv); err != nil {
				t.Fatal(err)
			}
			if got := CallTimeout(p); got != 17*time.Second {
				t.Errorf("CallTimeout with Timeout 17s = %v", got)
			}
		})
	}
	if got := CallTimeout(noReadback{}); got != 0 {
		t.Errorf("CallTimeout of a provider that declares none = %v, want 0", got)
	}
	if d := ConfigFromEnv(env(map[string]string{EnvTimeout: "120"})).Timeout; d != 2*time.Minute {
		t.Errorf("PROVIDER_TIMEOUT=120 parsed as %v, want 2m", d)
	}
}
