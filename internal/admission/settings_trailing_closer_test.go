package admission_test

import (
	"testing"

	"github.com/taskledger/taskledger/internal/admission"
)

// TestTrailingCloserIsTrailingData: ParseSettings promises that trailing
// data after the JSON object is an error (never silently ignored).
// json.Decoder.More reports false when the next token is '}' or ']', so a
// check that relies on it alone would accept a PROVIDER_ADMISSION with a
// stray closer (a hand-edited parameter with one brace too many) as if it
// were well-formed, in the worker and the submit function alike.
func TestTrailingCloserIsTrailingData(t *testing.T) {
	t.Parallel()
	const ok = `{"models":{"m1":{"requests_per_minute":100,"tokens_per_minute":2000}}}`
	for _, in := range []string{ok + "}", ok + "]", ok + " } garbage", ok + "]]]"} {
		if c, err := admission.ParseSettings([]byte(in)); err == nil {
			t.Errorf("ParseSettings(%q) = %+v, nil; want a trailing-data error", in, c.Models)
		}
	}
}
