package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// EnvVar names the environment variable holding the provider admission
// settings (JSON, see ParseSettings). Unset or empty: no admission, and no
// admission call at all. The worker admits its calls by them; the submit
// function refuses a task whose call could never be admitted under them.
const EnvVar = "PROVIDER_ADMISSION"

// Settings are the provider admission settings:
//
//	{"models": {"<model id>": {"requests_per_minute": 100, "tokens_per_minute": 200000}}}
type Settings struct {
	Models map[string]ModelLimit `json:"models"`
}

// ModelLimit is one model's provider limit per minute.
type ModelLimit struct {
	RequestsPerMinute int64 `json:"requests_per_minute"`
	TokensPerMinute   int64 `json:"tokens_per_minute"`
}

// ParseSettings reads Settings strictly: unknown fields, trailing data, no
// models, or a limit that is not positive are errors that name the field
// (never a silent default).
func ParseSettings(data []byte) (*Settings, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Settings
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvVar, err)
	}
	// Token, not More: More is false before a stray '}' or ']'.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: trailing data after the JSON object", EnvVar)
	}
	if len(c.Models) == 0 {
		return nil, fmt.Errorf("%s: \"models\" must name at least one model", EnvVar)
	}
	for _, m := range c.ModelIDs() {
		l := c.Models[m]
		if m == "" || l.RequestsPerMinute <= 0 || l.TokensPerMinute <= 0 {
			return nil, fmt.Errorf("%s: model %q: requests_per_minute and tokens_per_minute must be positive integers", EnvVar, m)
		}
	}
	return &c, nil
}

// ModelIDs returns the configured model ids, sorted.
func (c *Settings) ModelIDs() []string {
	ids := make([]string, 0, len(c.Models))
	for m := range c.Models {
		ids = append(ids, m)
	}
	sort.Strings(ids)
	return ids
}

// Limits converts the per-minute limits to Limits (one-minute windows).
func (c *Settings) Limits() map[string]Limit {
	out := make(map[string]Limit, len(c.Models))
	for m, l := range c.Models {
		out[m] = Limit{RequestsPerWindow: l.RequestsPerMinute, TokensPerWindow: l.TokensPerMinute}
	}
	return out
}
