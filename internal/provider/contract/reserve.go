package contract

// InputOverheadTokens is added to an input's byte count to bound its
// tokens: a token is at least one byte of text, so prompt bytes + system
// bytes + this overhead (message framing) bounds the input tokens of a
// generation.
const InputOverheadTokens = 32

// Per-document token bounds (DocumentTokens). Every figure is an upper
// bound on what one document can add to a call's input tokens, so a budget
// reservation or an admission estimate built from them is a limit, not a
// guess (issues 13 × 14).
const (
	// DocumentOverheadTokens is added per document for the content block
	// that carries it (the neutral name "document-N", the format, the
	// provider's wrapper around the extracted text).
	DocumentOverheadTokens = 64

	// ImageTokens bounds one png or jpeg. Anthropic's vision
	// documentation: an image costs about width × height / 750 tokens, and
	// one whose long edge is over 1,568 px or that would cost more than
	// ~1,600 tokens is first scaled down, so a picture costs at most
	// ~1,600 tokens (its own table's 784 × 1,568 px is 1,639). Claude
	// models from Opus 4.7 on read images up to 2,576 px on the long edge,
	// about 4,784 tokens (measured with count_tokens, third-party). The
	// bound takes the larger figure: reserving 3,000 tokens too many per
	// picture on an older model is cheap; under-reserving breaks the
	// promise.
	ImageTokens = 4_800

	// OpaqueDocumentTokens bounds one pdf, docx or doc. Their size says
	// nothing about their tokens: both are compressed containers (PDF
	// streams are usually Flate-compressed, docx is a zip), so extracted
	// text can be many times the bytes, and Claude's visual PDF mode adds
	// an image per page on top. The one bound that holds is the model's
	// context window: a request whose input is larger is refused by the
	// provider (a validation error, nothing billed), so no call can be
	// billed more input than that. This is the 200,000-token window of the
	// Claude models the Bedrock adapter targets; a model with a larger
	// window needs a larger figure here (the worker logs and counts
	// BoundExceeded whenever a provider reports more than the bound).
	OpaqueDocumentTokens = 200_000
)

// DocumentSize is what the token bound needs of a document: its short
// format name (pdf, txt, md, html, csv, docx, doc, png, jpeg) and its size
// in bytes.
type DocumentSize struct {
	Format string
	Size   int64
}

// DocumentTokens is the most input tokens one document can add to a call,
// DocumentOverheadTokens included:
//   - txt, md, csv, html: its size in bytes (a token is at least a byte of
//     text; the provider extracts or converts the text, never inflates it);
//   - png, jpeg: ImageTokens (images are scaled down to a bounded size);
//   - pdf, docx, doc, and any other format: OpaqueDocumentTokens (no bound
//     follows from the size of a compressed container).
func DocumentTokens(d DocumentSize) int64 {
	var n int64
	switch d.Format {
	case "txt", "md", "csv", "html":
		n = max(d.Size, 0)
	case "png", "jpeg":
		n = ImageTokens
	default:
		n = OpaqueDocumentTokens
	}
	return n + DocumentOverheadTokens
}

// CallMaximum returns upper bounds on the input and output tokens of one
// generation of in without documents: its prompt and system bytes plus
// InputOverheadTokens, each message's bytes plus MessageOverheadTokens,
// and its MaxTokens (MaxTokensLimit when it leaves
// the maximum to the provider's default). Spend budgets reserve this much
// before a call, and provider admission estimates it.
func CallMaximum(in GenerateInput) (input, output int64) {
	return CallMaximumWith(in, nil)
}

// CallMaximumWith is CallMaximum for a generation that also reads docs:
// the input bound adds DocumentTokens of each. The budget reservation (the
// worker), the admission estimate (the worker) and the submit check that a
// token budget covers one call (the API, at submit and at a regenerate
// inheriting its parent's documents) all use it, so they agree.
func CallMaximumWith(in GenerateInput, docs []DocumentSize) (input, output int64) {
	input = int64(len(in.Prompt)+len(in.System)) + InputOverheadTokens + in.messageBytes()
	for _, d := range docs {
		input += DocumentTokens(d)
	}
	output = int64(in.MaxTokens)
	if output <= 0 {
		output = MaxTokensLimit
	}
	return input, output
}
