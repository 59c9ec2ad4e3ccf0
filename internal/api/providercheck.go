package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Refusals of a generate task the worker's provider could never run
// (422, nothing recorded). The worker keeps its own refusal as the
// backstop: the configuration can change between submit and run.
const (
	// TypeDocumentsNotSupported: the task names documents and the
	// configured provider takes none (the openai adapter); the worker would
	// fail it permanent_input without a call.
	TypeDocumentsNotSupported = ProblemBase + "documents-not-supported"
	// TypeExceedsAdmissionLimit: the task's call bound (what admission
	// estimates: contract.CallMaximumWith, documents included) is above the
	// model's tokens_per_minute in PROVIDER_ADMISSION; the worker would
	// park it provider_config (review.AdmissionRefused) without a call.
	TypeExceedsAdmissionLimit = ProblemBase + "exceeds-admission-limit"
)

// ProviderProfile is what the submit knows of the worker's provider
// (read by lambdaenv.LoadProvider from the same variables the worker
// reads: PROVIDER, PROVIDER_MODEL, PROVIDER_ADMISSION). It holds no
// credential.
type ProviderProfile struct {
	// Name is the provider (simulated, bedrock, openai), named in details.
	Name string
	// Model is the model id calls are admitted by.
	Model string
	// AcceptsDocuments is false for a provider that refuses every request
	// with documents.
	AcceptsDocuments bool
	// TokensPerMinute is the model's admission limit; 0: no admission.
	TokensPerMinute int64
}

// refuseDocuments refuses a generate task naming n documents when the
// worker's provider takes none — before the uploads are resolved or
// copied. nil h.Provider: no check.
func (h *Handler) refuseDocuments(ctx context.Context, c *call, key string, n int) *Problem {
	if h.Provider == nil || n == 0 || h.Provider.AcceptsDocuments {
		return nil
	}
	return h.refuse(ctx, c, key, "documents_not_supported", documentsNotSupported(h.Provider, n))
}

// refuseOverAdmission refuses a generate task whose call bound (input and
// docs, resolved; nothing copied or written yet) the worker could never
// admit: above the caller's whole daily quota (refuseOverQuota, spend.go:
// exceeds-daily-quota), or above the model's tokens_per_minute
// (exceeds-admission-limit). nil h.Provider or no admission: no
// tokens_per_minute check.
func (h *Handler) refuseOverAdmission(ctx context.Context, c *call, key, input string, docs []ledger.DocumentRef) *Problem {
	if p := h.refuseOverQuota(ctx, c, key, input, docs); p != nil {
		return p
	}
	if h.Provider == nil || h.Provider.TokensPerMinute <= 0 {
		return nil
	}
	return h.refuse(ctx, c, key, "exceeds_admission_limit", overAdmission(h.Provider, input, docs))
}

// refuse returns p (nil: no refusal) unless the caller already has a task
// under key: a replay answers the task it recorded (or 422
// idempotency-key-reused) as before, even when the provider configuration
// changed since — the worker decides what happens to that task. Only a
// refusal costs the one extra GetItem.
func (h *Handler) refuse(ctx context.Context, c *call, key, outcome string, p *Problem) *Problem {
	if p == nil {
		return nil
	}
	recorded, sp := h.recorded(ctx, c, key)
	if sp != nil {
		return sp
	}
	if recorded {
		return nil
	}
	c.outcome = outcome
	return p
}

// recorded reports whether the caller already has a task under key (a
// replay, or a reuse of the key that Create answers 422). An item past its
// retention (expires_at passed, not yet swept) is not: Create treats it as
// absent and records a fresh task under the key (an expired key's item
// must not let a task the worker could never run be recorded). A failed read is the store's problem (503/500,
// retry-safe), not a refusal a replay could wrongly get.
func (h *Handler) recorded(ctx context.Context, c *call, key string) (bool, *Problem) {
	if c.recorded != nil {
		return true, nil
	}
	t, err := h.Ledger.Get(ctx, h.Ledger.TaskID(c.scope, key))
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return false, nil
	case err != nil:
		return false, h.storeProblem(ctx, c, "get", err)
	}
	if t.Scope != c.scope || t.PastRetention(h.now()) {
		return false, nil
	}
	c.recorded = t // the request is answered from it (create)
	return true, nil
}

func documentsNotSupported(pp *ProviderProfile, n int) *Problem {
	return newProblem(TypeDocumentsNotSupported, http.StatusUnprocessableEntity, "Documents not supported",
		fmt.Sprintf("This deployment's provider (%s, model %s) does not accept documents, and this task names %d; nothing was recorded. Submit the task without documents, or use a deployment whose provider reads them (bedrock or simulated).",
			pp.Name, pp.Model, n)).withField("documents")
}

// overAdmission refuses a call bound above the model's per-minute token
// limit, with the bound's parts (as budgetCoversOneCall details them).
func overAdmission(pp *ProviderProfile, input string, docs []ledger.DocumentRef) *Problem {
	g, err := contract.ParseGenerateInput(json.RawMessage(input))
	if err != nil {
		return nil // parseInput has accepted it; nothing to add
	}
	sizes := documentSizes(docs)
	in, out := contract.CallMaximumWith(g, sizes)
	if in+out <= pp.TokensPerMinute {
		return nil
	}
	prompt, _ := contract.CallMaximum(g)
	var parts strings.Builder
	fmt.Fprintf(&parts, "%d for the prompt (its bytes + %d)", prompt, contract.InputOverheadTokens)
	field := "input"
	if len(docs) > 0 {
		field = "documents"
		parts.WriteString(", ")
		fmt.Fprintf(&parts, "%d for its documents (", in-prompt)
		for i, d := range docs {
			if i > 0 {
				parts.WriteString(", ")
			}
			fmt.Fprintf(&parts, "documents[%d] (upload %s, %s, %d bytes): %d", i, d.UploadID, d.Format, d.Ref.Size, contract.DocumentTokens(sizes[i]))
		}
		fmt.Fprintf(&parts, "; text is bounded by its bytes, an image by %d, a pdf or docx by %d, each + %d)",
			contract.ImageTokens, contract.OpaqueDocumentTokens, contract.DocumentOverheadTokens)
	}
	fmt.Fprintf(&parts, " and %d for the output (input.max_tokens, or %d when unset)", out, contract.MaxTokensLimit)
	return newProblem(TypeExceedsAdmissionLimit, http.StatusUnprocessableEntity, "Exceeds the admission limit",
		fmt.Sprintf("One provider call of this task reserves up to %d tokens: %s. That is more than the %d tokens_per_minute model %s (provider %s) is admitted (PROVIDER_ADMISSION), so it could never be admitted; nothing was recorded. Set a lower input.max_tokens, shorten the input, or use fewer or smaller documents.",
			in+out, parts.String(), pp.TokensPerMinute, pp.Model, pp.Name)).withField(field)
}

// documentSizes is what a call bound needs of each document.
func documentSizes(docs []ledger.DocumentRef) []contract.DocumentSize {
	if len(docs) == 0 {
		return nil
	}
	out := make([]contract.DocumentSize, len(docs))
	for i, d := range docs {
		out[i] = contract.DocumentSize{Format: d.Format, Size: d.Ref.Size}
	}
	return out
}
