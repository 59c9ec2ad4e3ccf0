package ledger

import (
	"context"
	"time"
)

// WaitAdmission gives back the caller's assignment, before any provider
// call, to wait for provider admission (internal/admission): like Release,
// the attempt is given back and the holder stays fenced; unlike Release,
// the task goes to retry_wait until notBefore (due_at too, so the outbox
// relay re-sends a lost message), so no copy of the message can claim it
// earlier. Its error fields stay: waiting is not a failure. Accepts
// WithNonce. Errors: *FencedError.
func (l *Ledger) WaitAdmission(ctx context.Context, taskID string, version int64, notBefore time.Time, opts ...WriteOption) (*Task, error) {
	now := l.cfg.Now().UTC()
	nb := notBefore.UnixMilli()
	u := newUpdate().with(opts)
	l.live(u, StateRetryWait, taskID, nb)
	u.set("not_before", num(nb))
	u.remove("lease_owner", "lease_until")
	u.stamp(now)
	return l.write(ctx, "wait_admission", row("wait_admission"), taskID, &Call{Now: now, Version: version}, u)
}
