package ledger

import (
	"context"
	"time"
)

// Error classes of a cancel while running (the method recording each), and
// the messages CancelRunning and CompleteCancelled record.
const (
	ErrorCancelRequested       = "cancel_requested"        // CancelRunning: unknown until decided
	ErrorCancelledWhileRunning = "cancelled_while_running" // CancelUnknown
	ErrorCancelTooLate         = "cancel_too_late"         // CompleteCancelled: the provider had replied
	CancelRequestedMessage     = "cancel requested while running: the attempt was fenced; the task ends cancelled once it is known that the provider did not act (no call started, or a readback that finds nothing), completed if the fenced worker already held the provider's reply or a readback finds the result, or parked for review when that cannot be known"
	CancelTooLateMessage       = "a cancel arrived after the provider had replied: the provider had acted, so its one result was saved instead of being discarded"
)

// CancelRunning cancels a task running as read (or unknown, no cancel pending)
// by bumping its fencing token: none of the worker's writes can land. Whether
// the provider acted is not known yet: the task goes to unknown
// (cancel_version = the version read), which the unknown rules end cancelled,
// completed or parked unless the fenced worker settles it first
// (CompleteCancelled, CancelUnknown). Errors: ErrNotFound; *ConflictError.
func (l *Ledger) CancelRunning(ctx context.Context, read *Task) (*Task, error) {
	now := l.cfg.Now().UTC()
	u := newUpdate()
	// A live worker renews every lease/3: its lease as read ends after the renewal that finds it fenced.
	l.live(u, StateUnknown, read.TaskID, max(read.LeaseUntil, now.UnixMilli()))
	// The fenced call started while its lease held: uncertain since the lease's
	// end (or an unknown task's own). A lapsed lease read must still be the
	// item's: one renewed since may have started its call later.
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

// CancelUnknown ends cancelled a task CancelRunning left at version
// (Task.CancelledWhileRunning), once it is known the provider did not act
// (why says how); an attempt claimed since is refused: *FencedError.
func (l *Ledger) CancelUnknown(ctx context.Context, taskID string, version int64, why string) (*Task, error) {
	return l.fenced(ctx, "cancel_unknown", taskID, version, nil, func(u *update, now time.Time) {
		l.off(u, StateCancelled, now)
		setError(u, ErrorCancelledWhileRunning, why)
	})
}

// CompleteCancelled saves, class cancel_too_late, the result the worker got
// before a cancel while running fenced it (version: the one the cancel left):
// the provider acted and billed, and a park would only offer a second call.
// Anything that decided it first: *FencedError. Accepts WithNonce.
func (l *Ledger) CompleteCancelled(ctx context.Context, taskID string, version int64, c Completion, opts ...WriteOption) (*Task, error) {
	now := l.cfg.Now().UTC()
	u := newUpdate().with(opts)
	l.completion(u, taskID, c, now)
	setError(u, ErrorCancelTooLate, CancelTooLateMessage)
	return l.write(ctx, "complete_cancelled", gated("complete_cancelled", c.ApprovalTTL > 0), taskID, &Call{Now: now, Version: version}, u)
}

// CancelledAt reports whether fe is a completion at version refused by a
// cancel while running, undecided since: CompleteCancelled would save it.
func CancelledAt(fe *FencedError, version int64) bool {
	c := Call{Version: version + 1} // the version the cancel left
	return gated("complete_cancelled", false).Allows(fe.Current, c) || gated("complete_cancelled", true).Allows(fe.Current, c)
}

// CancelPending reports whether t is unknown after a cancel while running
// undecided since (CancelRunning's guard "running, or no cancel pending").
func CancelPending(t *Task) bool {
	return t != nil && t.State == StateUnknown && !gNoCancelPending.holds(t, &Call{Version: t.AssignmentVersion})
}
