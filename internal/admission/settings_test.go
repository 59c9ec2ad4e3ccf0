package admission_test

import (
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/admission"
)

func TestParseSettings(t *testing.T) {
	t.Parallel()
	c, err := admission.ParseSettings([]byte(`{"models":{"m1":{"requests_per_minute":100,"tokens_per_minute":2000}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Limits()["m1"]; l.RequestsPerWindow != 100 || l.TokensPerWindow != 2000 {
		t.Fatalf("parsed %+v", c)
	}
	for in, want := range map[string]string{
		`{"models":{}}`: `"models" must name at least one model`,
		`{"models":{"m":{"requests_per_minute":0,"tokens_per_minute":5}}}`:                          `model "m": requests_per_minute and tokens_per_minute must be positive`,
		`{"models":{"m":{"requests_per_minute":5,"tokens_per_minute":-1}}}`:                         `must be positive`,
		`{"models":{"m":{"requests_per_minute":5,"tokens_per_minute":5,"rpm":1}}}`:                  `unknown field "rpm"`,
		`{"models":{"m":{"requests_per_minute":5,"tokens_per_minute":5}}} {}`:                       `trailing data`,
		`{"models":{"m":{"requests_per_minute":5,"tokens_per_minute":5}},"default_max_tokens":256}`: `unknown field "default_max_tokens"`,
		`not json`: admission.EnvVar,
	} {
		_, err := admission.ParseSettings([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", in, err, want)
		}
	}
}
