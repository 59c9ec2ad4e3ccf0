package contract

// InputOverheadTokens is added to an input's byte count to bound its
// tokens: a token is at least one byte of text, so prompt bytes + system
// bytes + this overhead (message framing) bounds the input tokens of a
// generation.
const InputOverheadTokens = 32

// CallMaximum returns upper bounds on the input and output tokens of one
// generation of in: its prompt and system bytes plus InputOverheadTokens,
// and its MaxTokens (MaxTokensLimit when it leaves the maximum to the
// provider's default). Spend budgets reserve this much before a call.
func CallMaximum(in GenerateInput) (input, output int64) {
	input = int64(len(in.Prompt)+len(in.System)) + InputOverheadTokens
	output = int64(in.MaxTokens)
	if output <= 0 {
		output = MaxTokensLimit
	}
	return input, output
}
