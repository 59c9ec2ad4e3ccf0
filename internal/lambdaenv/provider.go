package lambdaenv

import (
	"fmt"
	"strings"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/provider"
)

// Provider is the worker's provider as the worker and the submit function
// both see it: the configuration, the model id its calls are admitted and
// priced by, and the admission settings. The submit function refuses, with
// it, a task the worker could never run (documents for a provider that
// takes none, a call bound above the model's tokens_per_minute).
type Provider struct {
	// Config is the provider configuration passed in (the worker's full
	// provider.ConfigFromEnv, the submit's provider.ModelFromEnv), its Name
	// lower-cased and NameSimulated when empty.
	Config provider.Config
	// Model is Config.ModelID(): the model the calls go to.
	Model string
	// Admission is PROVIDER_ADMISSION parsed; nil when it is unset (no
	// admission).
	Admission *admission.Settings
}

// TokensPerMinute is the admission limit of the provider's model, 0 when
// there is no admission.
func (p *Provider) TokensPerMinute() int64 {
	if p == nil || p.Admission == nil {
		return 0
	}
	return p.Admission.Models[p.Model].TokensPerMinute
}

// LoadProvider is NewProvider with PROVIDER_ADMISSION read through getenv:
// the one parser of these variables for the worker and the submit
// function.
func LoadProvider(cfg provider.Config, getenv func(string) string) (*Provider, error) {
	return NewProvider(cfg, getenv(admission.EnvVar))
}

// NewProvider validates cfg (an unknown PROVIDER, a missing
// PROVIDER_MODEL) and parses the admission settings rawAdmission holds
// (admission.ParseSettings; blank: no admission). With admission set, the
// provider's model must have limits: a worker that would park every task
// as misconfigured, or a submit that would accept them, refuses to start
// instead. The local stack calls it with its options.
func NewProvider(cfg provider.Config, rawAdmission string) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Name = strings.ToLower(cfg.Name)
	if cfg.Name == "" { // the zero Config (the local stack's default)
		cfg.Name = provider.NameSimulated
	}
	p := &Provider{Config: cfg, Model: cfg.ModelID()}
	raw := strings.TrimSpace(rawAdmission)
	if raw == "" {
		return p, nil
	}
	s, err := admission.ParseSettings([]byte(raw))
	if err != nil {
		return nil, err
	}
	if _, ok := s.Models[p.Model]; !ok {
		return nil, fmt.Errorf("%s has no limits for the provider's model %q (configured: %s)", admission.EnvVar, p.Model, strings.Join(s.ModelIDs(), ", "))
	}
	p.Admission = s
	return p, nil
}
