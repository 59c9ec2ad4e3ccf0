package ledger

import (
	"context"
	"time"
)

// WaitAdmission is Release, before any provider call, to retry_wait until
// notBefore, to wait for provider admission (internal/admission): no copy of
// the message claims it earlier (the relay re-sends a lost one then). Its error
// fields stay: waiting is no failure. Accepts WithNonce. Errors: *FencedError.
func (l *Ledger) WaitAdmission(ctx context.Context, taskID string, version int64, notBefore time.Time, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "wait_admission", taskID, version, opts, func(u *update, _ time.Time) {
		l.retryWait(u, taskID, notBefore)
		u.remove("lease_owner", "lease_until")
	})
}
