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
