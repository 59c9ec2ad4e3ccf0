package admission_test

import (
	"testing"

	"github.com/taskledger/taskledger/internal/admission"
)

// TestParseSettingsRefusesMalformedLimits probes ParseSettings with inputs a
// strict parser must refuse (or, where noted, may accept).
func TestParseSettingsRefusesMalformedLimits(t *testing.T) {
	ok := `{"models":{"m":{"requests_per_minute":1,"tokens_per_minute":2}}}`
	refuse := map[string]string{
		"two objects":    ok + ok,
		"stray ]":        ok + "]",
		"stray }":        ok + "}",
		"garbage":        ok + " x",
		"array":          `[` + ok + `]`,
		"null":           `null`,
		"empty models":   `{"models":{}}`,
		"null model":     `{"models":{"m":null}}`,
		"float":          `{"models":{"m":{"requests_per_minute":1.5,"tokens_per_minute":2}}}`,
		"string limit":   `{"models":{"m":{"requests_per_minute":"1","tokens_per_minute":2}}}`,
		"overflow":       `{"models":{"m":{"requests_per_minute":1,"tokens_per_minute":99999999999999999999}}}`,
		"negative":       `{"models":{"m":{"requests_per_minute":1,"tokens_per_minute":-2}}}`,
		"missing tokens": `{"models":{"m":{"requests_per_minute":1}}}`,
		"null tokens":    `{"models":{"m":{"requests_per_minute":1,"tokens_per_minute":null}}}`,
		"unknown field":  `{"models":{"m":{"requests_per_minute":1,"tokens_per_minute":2,"burst":3}}}`,
		"unknown top":    `{"models":{"m":{"requests_per_minute":1,"tokens_per_minute":2}},"x":1}`,
		"empty model id": `{"models":{"":{"requests_per_minute":1,"tokens_per_minute":2}}}`,
		"empty":          ``,
		"exponent":       `{"models":{"m":{"requests_per_minute":1,"tokens_per_minute":2e5}}}`,
	}
	for name, in := range refuse {
		if s, err := admission.ParseSettings([]byte(in)); err == nil {
			t.Errorf("%s: %q accepted as %+v", name, in, s)
		}
	}
	// Accepted (informational): encoding/json's case-insensitive field
	// match and last-wins duplicates.
	for name, in := range map[string]string{
		"case-insensitive field": `{"Models":{"m":{"REQUESTS_PER_MINUTE":1,"Tokens_Per_Minute":2}}}`,
		"duplicate model id":     `{"models":{"m":{"requests_per_minute":1,"tokens_per_minute":200000},"m":{"requests_per_minute":1,"tokens_per_minute":2}}}`,
	} {
		if s, err := admission.ParseSettings([]byte(in)); err == nil {
			t.Logf("accepted %s: %+v", name, s)
		}
	}
}
