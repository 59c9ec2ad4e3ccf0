package reconciler

import (
	"context"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// A cancel while running (ledger.CancelRunning) leaves the task unknown
// with cancel_version = the fenced assignment, the version before its own
// (Task.CancelledWhileRunning; an operator's retry of its park and the claim
// after it start an attempt no cancel fenced, although cancel_version stays
// on the item). The unknown rule resolves it
// like any uncertain attempt, except that "the provider did not act" ends
// it cancelled instead of re-queuing it:
//
//   - a provider whose calls the worker marks (neither idempotency nor
//     readback) without the mark at the cancelled version: no call had
//     started — cancelled (cancelledUnstarted);
//   - a readback that credibly finds nothing — cancelled (rules.go); for a
//     call marked at the cancelled version, "not found" is credible only
//     once the fenced lease's end plus the call timeout has passed, as
//     after an expired lease (callMayRun): until then the task waits, and
//     past its age budget it is parked;
//   - a readback that finds the result — completed from it: the provider
//     acted before the cancel took hold, and its one result is saved;
//   - no readback possible — parked unknown_outcome, like any uncertain
//     attempt: never a silent second effect, never a silent loss.

// cancelledUnstarted ends t cancelled when it was cancelled while running
// and the call-start mark proves no provider call had started under the
// cancelled assignment. It reports whether it handled t.
func (r *run) cancelledUnstarted(ctx context.Context, t *ledger.Task) bool {
	if !t.CancelledWhileRunning() || !r.h.callMarked(t) || t.CallStartedVersion == t.CancelVersion {
		return false
	}
	r.cancel(ctx, t, "cancelled while running before its provider call started (no call-start mark under the cancelled assignment)")
	return true
}

// cancelledRetrySafe ends t cancelled at once when it was cancelled while
// running and its call is retry-safe: whatever the call did costs only
// money, so there is nothing to wait for or read back; the attempt's
// reservation is charged in full (the provider may have billed it). It
// reports whether it handled t.
func (r *run) cancelledRetrySafe(ctx context.Context, t *ledger.Task) bool {
	if !t.CancelledWhileRunning() || !r.h.retrySafe(t) {
		return false
	}
	r.cancelCharged(ctx, t, "cancelled while running; the generation is retry-safe, so its call was abandoned and charged", 0)
	return true
}

// cancel ends t (unknown after a cancel while running) cancelled; the
// provider did not act under its last attempt, whose hold is given back.
func (r *run) cancel(ctx context.Context, t *ledger.Task, why string) {
	r.cancelCharged(ctx, t, why, t.Attempts)
}

// cancelCharged ends t cancelled and settles its holds in full, except
// attempt notCalled's (0: none), given back at nothing.
func (r *run) cancelCharged(ctx context.Context, t *ledger.Task, why string, notCalled int) {
	_, err := r.h.Ledger.CancelUnknown(ctx, t.TaskID, t.AssignmentVersion, why)
	if r.lost(ctx, "cancel after a cancel while running", t.TaskID, err) {
		return
	}
	r.count(func(s *Summary) { s.Cancelled++ })
	r.log.InfoContext(ctx, "reconciler: cancelled while running", "task_id", t.TaskID, "version", t.AssignmentVersion, "why", why)
	r.settleAbandoned(ctx, t, notCalled)
}
