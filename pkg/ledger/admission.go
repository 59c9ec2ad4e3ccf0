package ledger

import (
	"context"
	"time"
)

// WaitAdmission gives back the caller's assignment, before any provider call,
// to wait for provider admission (internal/admission): as Release does, but
// to retry_wait until notBefore (due_at too: the outbox relay re-sends a lost
// message), so no copy of the message claims it earlier. Its error fields
// stay: waiting is not a failure. Accepts WithNonce. Errors: *FencedError.
func (l *Ledger) WaitAdmission(ctx context.Context, taskID string, version int64, notBefore time.Time, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "wait_admission", taskID, version, opts, func(u *update, _ time.Time) {
		l.retryWait(u, taskID, notBefore)
		u.remove("lease_owner", "lease_until")
	})
}
