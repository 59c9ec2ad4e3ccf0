package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
)

// The simulated provider's three modes are the soak's: what a team sees on
// `make run` with PROVIDER_SIMULATED_MODE is the policy it would get from a
// provider that deduplicates, one that does neither, and one that only
// reads back.
func TestSimulatedModeChoosesIdempotencyAndReadback(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mode               string
		honours, readsBack bool
	}{
		{"", true, true},
		{"idempotent", true, true},
		{" Plain ", false, false},
		{"plain+readback", false, true},
	} {
		cfg := ConfigFromEnv(env(map[string]string{EnvSimulatedMode: c.mode}))
		if err := cfg.Validate(); err != nil {
			t.Fatalf("mode %q: Validate: %v", c.mode, err)
		}
		p, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("mode %q: New: %v", c.mode, err)
		}
		if got := HonoursIdempotency(p); got != c.honours {
			t.Errorf("mode %q: honours idempotency %t, want %t", c.mode, got, c.honours)
		}
		_, lerr := Lookup(context.Background(), p, "t_never_called")
		if readsBack := !errors.Is(lerr, contract.ErrNoReadback); readsBack != c.readsBack {
			t.Errorf("mode %q: Lookup answered %v; reads back %t, want %t", c.mode, lerr, readsBack, c.readsBack)
		}
		if c.mode != "" && !strings.Contains(cfg.String(), "mode="+strings.TrimSpace(strings.ToLower(c.mode))) {
			t.Errorf("mode %q: String() = %q does not name the mode", c.mode, cfg.String())
		}
	}
}

func TestSimulatedModeRefusesAnUnknownMode(t *testing.T) {
	t.Parallel()
	cfg := ConfigFromEnv(env(map[string]string{EnvSimulatedMode: "forgiving"}))
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), EnvSimulatedMode) || !strings.Contains(err.Error(), "plain+readback") {
		t.Fatalf("Validate = %v, want an error naming %s and the legal modes", err, EnvSimulatedMode)
	}
}

// A mode is a property of the simulated provider only: naming one for a
// real provider is a configuration error, not silently ignored.
func TestSimulatedModeIsRefusedForARealProvider(t *testing.T) {
	t.Parallel()
	cfg := ConfigFromEnv(env(map[string]string{EnvProvider: "bedrock", EnvModel: "m", EnvSimulatedMode: "plain"}))
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), EnvSimulatedMode) {
		t.Fatalf("Validate = %v, want an error naming %s", err, EnvSimulatedMode)
	}
}

// Generation is retry-safe unless a deployment declares it an effect; any
// other class is a configuration error, never a silent default.
func TestGenerationEffectClass(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"": true, "retry-safe": true, " Effect ": false} {
		cfg := ConfigFromEnv(env(map[string]string{EnvGenerationClass: v}))
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%q: Validate: %v", v, err)
		}
		if got := cfg.RetrySafeGeneration(); got != want {
			t.Errorf("%q: RetrySafeGeneration = %t, want %t", v, got, want)
		}
	}
	cfg := ConfigFromEnv(env(map[string]string{EnvGenerationClass: "idempotent"}))
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), EnvGenerationClass) {
		t.Fatalf("Validate = %v, want an error naming %s", err, EnvGenerationClass)
	}
}
