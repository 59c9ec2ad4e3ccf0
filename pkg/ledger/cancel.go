package ledger

import (
	"context"
)

// Error classes of a cancel while running (CancelRunning, CancelUnknown).
const (
	// ErrorCancelRequested marks a task whose running attempt was fenced by
	// a cancel; it is in unknown until the reconciler decides.
	ErrorCancelRequested = "cancel_requested"
	// ErrorCancelledWhileRunning is the class of a task that ended
	// cancelled after a cancel while running.
	ErrorCancelledWhileRunning = "cancelled_while_running"
)

// CancelRequestedMessage is the error message CancelRunning records.
const CancelRequestedMessage = "cancel requested while running: the attempt was fenced; the task ends cancelled once it is known that the provider did not act (no call started, or a readback that finds nothing), completed if the fenced worker already held the provider's reply or a readback finds the result, or parked for review when that cannot be known"

// CancelRunning cancels a running task as the caller read it (read) — or
// an unknown one nobody has cancelled at its version: one conditional
// UpdateItem on state = running (or unknown without a cancel at this
// version) AND assignment_version = the version read that bumps the
// fencing token (assignment_version + 1), so the
// worker's next heartbeat renewal is refused, its provider call context is
// cancelled and none of its writes can land. Whether its provider call had
// started — and whether the provider acted — is not known at this point,
// so the task goes to unknown with cancel_version = version and error
// class cancel_requested, due when the fenced lease would have ended (by
// then the worker has found itself fenced): the reconciler then ends it
// cancelled (no call started, or a readback credibly finding nothing:
// CancelUnknown), completed (a readback found the result), or parks it
// unknown_outcome (no readback) — never a silent second effect — unless
// the fenced worker already held the provider's reply and saves it first
// (CompleteCancelled, cancel_too_late) or, for a gated task or a refused
// input, ends it cancelled (CancelUnknown). A write
// whose reply was lost is recognised (write_nonce).
//
// Errors: ErrNotFound; *ConflictError with the current task when the task
// is no longer running at version (completed, re-queued, taken over, ...).
func (l *Ledger) CancelRunning(ctx context.Context, read *Task) (*Task, error) {
	taskID, version := read.TaskID, read.AssignmentVersion
	now := l.cfg.Now().UTC()
	// A live worker renews every lease/3, so the lease it held when read
	// ends after its next renewal, the one that finds it fenced.
	due := max(read.LeaseUntil, now.UnixMilli())
	u := newUpdate()
	l.live(u, StateUnknown, taskID, due)
	u.setExpr("#assignment_version = #assignment_version + :one")
	u.v("one", num(1))
	u.set("cancel_version", num(version))
	setError(u, ErrorCancelRequested, CancelRequestedMessage)
	u.remove("lease_owner", "lease_until")
	u.stamp(now)
	// Running, or unknown because the attempt lapsed or its outcome was
	// lost (no cancel yet at this version): the attempt is fenced all the
	// same, and the unknown rules then end it cancelled instead of
	// re-queuing it (adversarial review of issue 14: a 409 there let a
	// readback that finds nothing call the provider again after the
	// caller asked to stop).
	fence(u, version, StateRunning, StateUnknown)
	cv := u.n("cancel_version")
	// (unknown at v after a cancel at v-1 is that cancel's state: not again)
	u.cond(u.n("state") + " = :from OR attribute_not_exists(" + cv + ") OR " + cv + " < " + u.v("before", num(version-1)))
	t, err := l.apply(ctx, "cancel_running", taskID, u)
	if err == nil {
		return t, nil
	}
	if !isConditionFailed(err) {
		return nil, wrapErr("UpdateItem cancel_running", err)
	}
	old, mine, rerr := l.currentOf(ctx, taskID, err)
	switch {
	case rerr != nil:
		return nil, rerr
	case mine:
		return old, nil
	case old == nil:
		return nil, &notFound{taskID}
	}
	return nil, &ConflictError{TaskID: taskID, Op: "cancel_running", State: old.State, Task: old}
}

// CancelUnknown ends a task whose running attempt was cancelled
// (CancelRunning) as cancelled, once the reconciler knows the provider did
// not act: conditioned on state = unknown, assignment_version = version and
// cancel_version being set. why says how it is known (recorded as the
// error message, class cancelled_while_running). Errors: *FencedError.
func (l *Ledger) CancelUnknown(ctx context.Context, taskID string, version int64, why string) (*Task, error) {
	now := l.cfg.Now().UTC()
	u := newUpdate()
	l.off(u, StateCancelled, now)
	setError(u, ErrorCancelledWhileRunning, why)
	u.stamp(now)
	fence(u, version, StateUnknown)
	u.cond("attribute_exists(" + u.n("cancel_version") + ")")
	t, err := l.apply(ctx, "cancel_unknown", taskID, u)
	if err != nil {
		if t, err = l.fenced(ctx, taskID, version, err); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// ErrorCancelTooLate is the class a task keeps when a cancel while running
// arrived after the provider had replied and the fenced worker saved that
// reply (CompleteCancelled).
const ErrorCancelTooLate = "cancel_too_late"

// CancelTooLateMessage is the error message CompleteCancelled records.
const CancelTooLateMessage = "a cancel arrived after the provider had replied: the provider had acted, so its one result was saved instead of being discarded"

// CompleteCancelled saves the result the worker holding assignment version
// received from the provider before a cancel while running fenced it
// (CancelRunning moved the task to unknown at version+1 with
// cancel_version = version). The provider acted and billed; discarding the
// one result in hand would leave a parked unknown_outcome whose only
// remedy is a second call (adversarial review of issue 14). One
// conditional UpdateItem on state = unknown AND assignment_version =
// version+1 AND cancel_version = version AND no result yet: the task
// becomes completed (or awaiting_approval behind its gate) with error class
// cancel_too_late. Anything else — the reconciler decided first, an
// operator acted — is a *FencedError and nothing is written. A write whose
// reply was lost is recognised (WithNonce).
func (l *Ledger) CompleteCancelled(ctx context.Context, taskID string, version int64, c Completion, opts ...WriteOption) (*Task, error) {
	u, resultBytes := l.completion(taskID, c, opts)
	setError(u, ErrorCancelTooLate, CancelTooLateMessage)
	fence(u, version+1, StateUnknown)
	u.cond(u.n("cancel_version") + " = " + u.v("cancelled", num(version)))
	return l.sendCompletion(ctx, "complete_cancelled", taskID, version+1, u, resultBytes)
}

// CancelledAt reports whether fe is a completion refused because a cancel
// while running fenced exactly the caller's assignment version and nothing
// has decided the task since (CompleteCancelled may save the result).
func CancelledAt(fe *FencedError, version int64) bool {
	c := fe.Current
	return c != nil && c.State == StateUnknown && c.CancelVersion == version &&
		c.AssignmentVersion == version+1 && !c.HasResult()
}
