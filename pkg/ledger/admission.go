package ledger

import (
	"context"
	"time"
)

// WaitAdmission gives back the caller's assignment, before any provider
// call, to wait for provider admission (internal/admission: the model's
// last 60 s leave no room for the call): like Release, the attempt is given
// back (attempts - 1) since no call was made, and the assignment version
// stays incremented so the holder stays fenced; unlike Release, the task
// goes to retry_wait with not_before = notBefore (due_at too, so the
// outbox relay re-sends it if the message is lost), so no copy of the
// message can claim it before notBefore. The task's error fields are
// left as they were: waiting is not a failure. One fenced UpdateItem; a
// write whose reply was lost is recognised by write_nonce (pass WithNonce
// to repeat it). Errors: *FencedError.
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
