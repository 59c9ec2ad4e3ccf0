package lambdaenv_test

import (
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/lambdaenv"
	"github.com/taskledger/taskledger/internal/provider"
)

func TestLoadProvider(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	p, err := lambdaenv.LoadProvider(provider.ModelFromEnv(env(nil)), env(nil))
	if err != nil || p.Model != "simulated-1" || p.Admission != nil || p.TokensPerMinute() != 0 || !p.Config.AcceptsDocuments() {
		t.Fatalf("defaults: %+v, %v; want the simulated model, no admission", p, err)
	}
	vars := map[string]string{"PROVIDER": "openai", "PROVIDER_MODEL": "gpt-x",
		"PROVIDER_ADMISSION": `{"models":{"gpt-x":{"requests_per_minute":10,"tokens_per_minute":150000}}}`}
	p, err = lambdaenv.LoadProvider(provider.ModelFromEnv(env(vars)), env(vars))
	if err != nil || p.Model != "gpt-x" || p.TokensPerMinute() != 150000 || p.Config.AcceptsDocuments() {
		t.Fatalf("openai with admission: %+v, %v", p, err)
	}
	for name, bad := range map[string]map[string]string{
		`no limits for the provider's model "simulated-1"`: {"PROVIDER_ADMISSION": `{"models":{"other":{"requests_per_minute":1,"tokens_per_minute":1}}}`},
		"must be positive":                  {"PROVIDER_ADMISSION": `{"models":{"simulated-1":{"requests_per_minute":1}}}`},
		"PROVIDER_MODEL is required":        {"PROVIDER": "bedrock"},
		`PROVIDER: unknown provider "nope"`: {"PROVIDER": "nope"},
	} {
		if _, err := lambdaenv.LoadProvider(provider.ModelFromEnv(env(bad)), env(bad)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: %v, want an error containing %q", bad, err, name)
		}
	}
	if p, err := lambdaenv.NewProvider(provider.Config{}, ""); err != nil || p.Config.Name != provider.NameSimulated || p.Model != "simulated-1" {
		t.Fatalf("zero Config: %+v, %v; want the simulated provider named", p, err)
	}
	var none *lambdaenv.Provider
	if none.TokensPerMinute() != 0 {
		t.Error("nil Provider has a token limit")
	}
}
