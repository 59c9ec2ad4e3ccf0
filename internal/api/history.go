package api

import (
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// AttemptView is one attempt of a task (ledger.Task.History): when it was
// claimed, when its provider call started (providers without idempotency
// keys mark it), when it ended and how, the provider's reference and the
// tokens it reported, where known.
type AttemptView struct {
	Attempt       int    `json:"attempt"`
	ClaimedAt     string `json:"claimed_at,omitempty"`
	CallStartedAt string `json:"call_started_at,omitempty"`
	EndedAt       string `json:"ended_at,omitempty"`
	// Outcome is running, completed, retry, failed, unknown, lapsed (its
	// lease expired and the reconciler moved the task on), cancelled,
	// parked (needs_review) or not_recorded (it ended without a write that
	// records it: only its number is known).
	Outcome     string      `json:"outcome"`
	ErrorClass  string      `json:"error_class,omitempty"`
	ProviderRef string      `json:"provider_ref,omitempty"`
	Tokens      *TokensView `json:"tokens,omitempty"`
}

// historyOf renders t's attempts, oldest first; tokens are the usage the
// saved result reports, shown on the attempt that completed.
func historyOf(t *ledger.Task, tokens *TokensView) []AttemptView {
	at := func(ms int64) string {
		if ms == 0 {
			return ""
		}
		return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	}
	h := t.History()
	out := make([]AttemptView, len(h))
	for i, r := range h {
		out[i] = AttemptView{Attempt: r.Attempt, ClaimedAt: at(r.ClaimedMs), CallStartedAt: at(r.CallStartedMs), EndedAt: at(r.EndedMs),
			Outcome: r.Outcome, ErrorClass: r.ErrorClass, ProviderRef: r.ProviderRef}
		if r.InputTokens != nil && r.OutputTokens != nil {
			out[i].Tokens = &TokensView{Input: int(*r.InputTokens), Output: int(*r.OutputTokens)}
		}
		if r.Outcome == ledger.OutcomeCompleted && out[i].Tokens == nil && tokens != nil {
			tv := *tokens
			out[i].Tokens = &tv
		}
	}
	return out
}
