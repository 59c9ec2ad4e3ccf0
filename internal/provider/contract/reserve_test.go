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

func TestCallMaximumWithDocuments(t *testing.T) {
	in := contract.GenerateInput{Prompt: "ab", MaxTokens: 10}
	for _, c := range []struct {
		docs  []contract.DocumentSize
		inTok int64
	}{
		{nil, 2 + 32},
		{[]contract.DocumentSize{{Format: "txt", Size: 120_000}}, 2 + 32 + 120_000 + contract.DocumentOverheadTokens},
		{[]contract.DocumentSize{{Format: "md", Size: 5}, {Format: "csv", Size: 7}, {Format: "html", Size: 11}},
			2 + 32 + 5 + 7 + 11 + 3*contract.DocumentOverheadTokens},
		// An image's bound does not depend on its size.
		{[]contract.DocumentSize{{Format: "png", Size: 3_750_000}, {Format: "jpeg", Size: 10}},
			2 + 32 + 2*(contract.ImageTokens+contract.DocumentOverheadTokens)},
		// Nor does a compressed container's: a 10-byte pdf is bounded by
		// the context window like a 4.5 MB one.
		{[]contract.DocumentSize{{Format: "pdf", Size: 10}, {Format: "docx", Size: 4_500_000}, {Format: "doc", Size: 1}},
			2 + 32 + 3*(contract.OpaqueDocumentTokens+contract.DocumentOverheadTokens)},
		// An unknown format is bounded as an opaque one, never by its size.
		{[]contract.DocumentSize{{Format: "xlsx", Size: 1}}, 2 + 32 + contract.OpaqueDocumentTokens + contract.DocumentOverheadTokens},
	} {
		gotIn, gotOut := contract.CallMaximumWith(in, c.docs)
		if gotIn != c.inTok || gotOut != 10 {
			t.Errorf("CallMaximumWith(%+v) = %d, %d; want %d, 10", c.docs, gotIn, gotOut, c.inTok)
		}
	}
	if a, b := contract.CallMaximum(in); a != 2+32 || b != 10 {
		t.Errorf("CallMaximum = %d, %d; want the bound without documents", a, b)
	}
}
