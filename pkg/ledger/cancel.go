package ledger

import (
	"context"
	"time"
)

// Error classes of a cancel while running, and the messages recorded with them.
const (
	// ErrorCancelRequested: a cancel fenced the running attempt (CancelRunning);
	// the task is unknown until it is decided.
	ErrorCancelRequested = "cancel_requested"
	// ErrorCancelledWhileRunning: the task ended cancelled (CancelUnknown).
	ErrorCancelledWhileRunning = "cancelled_while_running"
	// ErrorCancelTooLate: the cancel came after the provider had replied and
	// the fenced worker saved that reply (CompleteCancelled).
	ErrorCancelTooLate = "cancel_too_late"
	// CancelRequestedMessage is the error message CancelRunning records.
	CancelRequestedMessage = "cancel requested while running: the attempt was fenced; the task ends cancelled once it is known that the provider did not act (no call started, or a readback that finds nothing), completed if the fenced worker already held the provider's reply or a readback finds the result, or parked for review when that cannot be known"
	// CancelTooLateMessage is the error message CompleteCancelled records.
	CancelTooLateMessage = "a cancel arrived after the provider had replied: the provider had acted, so its one result was saved instead of being discarded"
)

// CancelRunning cancels a task running as the caller read it (or unknown
// with no cancel pending) by bumping its fencing token: none of the
// worker's writes can land. Whether the provider acted is not known yet,
// so the task goes to unknown (cancel_version = the version read, class
// cancel_requested), due when the fenced lease would have ended; the
// unknown rules then end it cancelled, completed or parked, unless the
// fenced worker settles it first (CompleteCancelled, CancelUnknown).
// Errors: ErrNotFound; *ConflictError (no longer running at the version).
func (l *Ledger) CancelRunning(ctx context.Context, read *Task) (*Task, error) {
	now := l.cfg.Now().UTC()
	u := newUpdate()
	// A live worker renews every lease/3, so the lease it held when read
	// ends after its next renewal, the one that finds it fenced.
	l.live(u, StateUnknown, read.TaskID, max(read.LeaseUntil, now.UnixMilli()))
	// The fenced call started while its lease held, so it ends by the
	// lease's end plus the call timeout however late the cancel came: the
	// uncertainty dates from there (Task.UnknownSince), or from when an
	// unknown task's already did. A lapsed lease read must still be the
	// item's (guard "lapsed lease as read"): a worker that renewed it since
	// may have started its call after it.
	c := &Call{Now: now, Version: read.AssignmentVersion}
	switch {
	case read.State == StateUnknown:
		u.set("unknown_since", num(read.UnknownSince().UnixMilli()))
	case read.LeaseUntil > 0:
		u.set("unknown_since", num(read.LeaseUntil))
		if read.LeaseUntil < now.UnixMilli() {
			c.LeaseUntil = read.LeaseUntil
		}
	}
	u.set("cancel_version", num(read.AssignmentVersion))
	setError(u, ErrorCancelRequested, CancelRequestedMessage)
	u.remove("lease_owner", "lease_until")
	t, _, err := l.decideOne(ctx, "cancel_running", read.TaskID, c, u)
	return t, err
}

// CancelUnknown ends cancelled a task whose running attempt was cancelled
// (CancelRunning), once it is known the provider did not act; why (its error
// message) says how. version is the one the cancel left (cancel_version =
// version-1, Task.CancelledWhileRunning): an attempt claimed since is
// refused with a *FencedError.
func (l *Ledger) CancelUnknown(ctx context.Context, taskID string, version int64, why string) (*Task, error) {
	return l.fenced(ctx, "cancel_unknown", taskID, version, nil, func(u *update, now time.Time) {
		l.off(u, StateCancelled, now)
		setError(u, ErrorCancelledWhileRunning, why)
	})
}

// CompleteCancelled saves the result the worker received before a cancel
// while running fenced its assignment (version: the one the cancel left,
// cancel_version = version-1). The provider acted and billed; discarding
// the one result in hand would leave a park whose only remedy is a second
// call. The task becomes completed (or awaiting_approval) with class
// cancel_too_late; if anything decided it first, *FencedError and nothing
// written. Accepts WithNonce.
func (l *Ledger) CompleteCancelled(ctx context.Context, taskID string, version int64, c Completion, opts ...WriteOption) (*Task, error) {
	now := l.cfg.Now().UTC()
	u := newUpdate().with(opts)
	l.completion(u, taskID, c, now)
	setError(u, ErrorCancelTooLate, CancelTooLateMessage)
	return l.write(ctx, "complete_cancelled", gated("complete_cancelled", c.ApprovalTTL > 0), taskID, &Call{Now: now, Version: version}, u)
}

// CancelledAt reports whether fe is a completion refused by a cancel while
// running of exactly the caller's version, undecided since:
// CompleteCancelled (gated or not) would save the result.
func CancelledAt(fe *FencedError, version int64) bool {
	c := Call{Version: version + 1} // the version the cancel left
	return gated("complete_cancelled", false).Allows(fe.Current, c) || gated("complete_cancelled", true).Allows(fe.Current, c)
}

// CancelPending reports whether t is unknown after a cancel while running
// that nothing has decided since: CancelRunning refuses it as already
// requested (its guard "running, or no cancel pending").
func CancelPending(t *Task) bool {
	return t != nil && t.State == StateUnknown && !gNoCancelPending.holds(t, &Call{Version: t.AssignmentVersion})
}
