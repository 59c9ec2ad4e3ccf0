package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// ProgressView says what is happening to a task now, from what its item
// already holds (no write per token or per second): which attempt of how
// many, since when the running one last renewed its lease, when a
// retry_wait task runs next, and the tokens the provider reported once it
// completed.
type ProgressView struct {
	// Summary is one line a person reads, e.g. "attempt 2 of 5 running
	// for 12s; lease renewed 4s ago" or "attempt 3 of 5 in 12s".
	Summary string `json:"summary"`
	// Attempt is the attempt running (running, unknown) or made last;
	// NextAttempt the one a queued or retry_wait task makes next.
	Attempt     int `json:"attempt"`
	NextAttempt int `json:"next_attempt,omitempty"`
	MaxAttempts int `json:"max_attempts"`
	// ClaimedAt is when the running attempt was claimed (the summary's
	// "running for"); HeartbeatAt its last write (its claim, a lease
	// renewal every lease/3, or its call-start mark); LeaseUntil is when
	// its lease ends unless renewed.
	ClaimedAt   string `json:"claimed_at,omitempty"`
	HeartbeatAt string `json:"heartbeat_at,omitempty"`
	LeaseUntil  string `json:"lease_until,omitempty"`
	// NextAttemptAt is when a retry_wait task may run again (not_before),
	// NextAttemptInMs how long that is from now (0 once it has passed).
	NextAttemptAt   string `json:"next_attempt_at,omitempty"`
	NextAttemptInMs *int64 `json:"next_attempt_in_ms,omitempty"`
	// Tokens are the usage the provider reported with the saved result
	// (completed generate tasks whose result says it).
	Tokens *TokensView `json:"tokens,omitempty"`
}

// TokensView is a generation's reported usage.
type TokensView struct {
	Input  int `json:"input"`
	Output int `json:"output"`
}

// progressOf renders t's progress at now; result is the saved result as
// the view shows it (nil when none is shown).
func progressOf(t *ledger.Task, now time.Time, result json.RawMessage) *ProgressView {
	p := &ProgressView{Attempt: t.Attempts, MaxAttempts: t.MaxAttempts}
	ms := func(v int64) string { return time.UnixMilli(v).UTC().Format(time.RFC3339Nano) }
	of := fmt.Sprintf(" of %d", t.MaxAttempts)
	switch t.State {
	case ledger.StateQueued:
		p.NextAttempt = t.Attempts + 1
		p.Summary = fmt.Sprintf("queued for attempt %d%s", p.NextAttempt, of)
	case ledger.StateRunning:
		p.HeartbeatAt = t.UpdatedAt
		if t.LeaseUntil > 0 {
			p.LeaseUntil = ms(t.LeaseUntil)
		}
		running := ""
		if t.ClaimedMs > 0 { // a task claimed before claim times were kept has none
			p.ClaimedAt = ms(t.ClaimedMs)
			running = " for " + ago(now, t.ClaimedMs).String()
		}
		p.Summary = fmt.Sprintf("attempt %d%s running%s; lease renewed %s ago", t.Attempts, of, running, ago(now, t.UpdatedMs))
	case ledger.StateRetryWait:
		p.NextAttempt = t.Attempts + 1
		in := int64(0)
		if t.NotBefore > 0 {
			p.NextAttemptAt = ms(t.NotBefore)
			in = max(t.NotBefore-now.UnixMilli(), 0)
		}
		p.NextAttemptInMs = &in
		p.Summary = fmt.Sprintf("attempt %d%s failed; attempt %d in %s", t.Attempts, of, p.NextAttempt, time.Duration(in)*time.Millisecond/time.Second*time.Second)
	case ledger.StateUnknown:
		p.Summary = fmt.Sprintf("attempt %d%s: outcome uncertain, being read back", t.Attempts, of)
	case ledger.StateAwaitingApproval:
		p.Summary = fmt.Sprintf("generated in attempt %d%s; awaiting approval", t.Attempts, of)
	case ledger.StateNeedsReview:
		p.Summary = fmt.Sprintf("parked for review after attempt %d%s", t.Attempts, of)
	default:
		p.Summary = fmt.Sprintf("%s after attempt %d%s", t.State, t.Attempts, of)
	}
	if len(result) > 0 {
		var r struct {
			Usage *struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal(result, &r) == nil && r.Usage != nil {
			p.Tokens = &TokensView{Input: r.Usage.InputTokens, Output: r.Usage.OutputTokens}
		}
	}
	return p
}

// ago is now - ms, to the second.
func ago(now time.Time, ms int64) time.Duration {
	d := max(now.Sub(time.UnixMilli(ms)), 0)
	return d.Truncate(time.Second)
}
