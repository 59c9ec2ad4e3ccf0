package review

import (
	"fmt"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// LapsedResult is the resolution of an unknown_outcome review item that the
// worker resolves itself (ledger.CompleteLapsed): the attempt t (the task as
// the worker claimed it) was slow, not lost; its result (x) arrived at `at`,
// after the reconciler had parked the task, and the worker saved it. The
// note says what is now known — the provider acted, once, and the result is
// saved — so the open uncertainty and its "retry" are void. by is the
// worker's lease owner.
func LapsedResult(t *ledger.Task, x Result, at time.Time, by string) ledger.LapsedResolution {
	note := fmt.Sprintf("resolved by the worker: %s; its result (%d bytes) arrived at %s, after the task was parked unknown_outcome, "+
		"and was saved with the same assignment version %d, so the outcome is known and no retry is needed",
		x.source(t), x.ResultBytes, at.UTC().Format(time.RFC3339), t.AssignmentVersion)
	return ledger.LapsedResolution{By: "worker " + by, Note: clip(note, ledger.MaxNote)}
}

// LapsedRefused is the resolution of an unknown_outcome review item that
// the worker resolves itself when the lapsed attempt's provider call failed
// without acting (ledger.FailLapsed for a rejected input, ledger.RetryLapsed
// for a transient refusal): the provider answered f at `at`, after the
// park, so it did not perform (or bill) the generation and the uncertainty
// is void. then says what the worker did ("the task failed", "a retry is
// scheduled for …"). by is the worker's lease owner.
func LapsedRefused(t *ledger.Task, provider string, f Failure, at time.Time, by, then string) ledger.LapsedResolution {
	if provider == "" {
		provider = "the provider"
	}
	what := f.Class
	if d := f.detail(); d != "" {
		what += " (" + d + ")"
	}
	note := fmt.Sprintf("resolved by the worker: attempt %d of %d called %s with operation id %s; its answer arrived at %s, after the task was parked "+
		"unknown_outcome: %s, so the provider did not act; %s",
		t.Attempts, t.MaxAttempts, provider, t.OperationID(), at.UTC().Format(time.RFC3339), what, then)
	return ledger.LapsedResolution{By: "worker " + by, Note: clip(note, ledger.MaxNote)}
}
