package contract_test

import (
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
)

func TestCallMaximum(t *testing.T) {
	for _, c := range []struct {
		in     contract.GenerateInput
		inTok  int64
		outTok int64
	}{
		{contract.GenerateInput{Prompt: "héllo"}, 6 + 32, contract.MaxTokensLimit}, // bytes, not characters
		{contract.GenerateInput{Prompt: "ab", System: "cde", MaxTokens: 7}, 5 + 32, 7},
	} {
		in, out := contract.CallMaximum(c.in)
		if in != c.inTok || out != c.outTok {
			t.Errorf("CallMaximum(%+v) = %d, %d; want %d, %d", c.in, in, out, c.inTok, c.outTok)
		}
	}
}
