package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// ClaimOptions configure Claim.
type ClaimOptions struct {
	Owner string        // the worker (e.g. request id + record id), for operators
	Lease time.Duration // how long the claim holds without a heartbeat
	// AllowTakeover permits claiming a running task whose lease expired:
	// only safe when the provider honours the operation id as an
	// idempotency key. TakeoverKind, when set, limits it to that kind (a
	// deliver task's expired lease is the reconciler's to resolve).
	AllowTakeover bool
	TakeoverKind  string
}

// Claim takes the task for one attempt (row claim, one conditional
// UpdateItem): state running, assignment_version (the fencing token) and
// attempts +1, and the lease. Refused by a retry_wait task, it writes again
// as ClaimRetry; with AllowTakeover, refused by a running task whose lease
// expired, as TakeOver at the version the refusal read. A lost reply retried
// by the SDK is recognised by write_nonce: claimed, not "leased".
// Errors: *NotClaimableError with the reason (terminal, parked, leased,
// not_due, unknown_outcome, budget_exhausted, expired_lease, not_found,
// contended), *ThrottledError.
func (l *Ledger) Claim(ctx context.Context, taskID string, o ClaimOptions) (*Task, error) {
	return l.claim(ctx, "claim", taskID, nil, o, Call{}, nil)
}

// ClaimRetry claims read, a retry_wait task, for its next attempt (row
// claim_retry: also moves its by_state entry to active): the refused
// claim's second write. Errors: as Claim's.
func (l *Ledger) ClaimRetry(ctx context.Context, read *Task, o ClaimOptions) (*Task, error) {
	return l.claim(ctx, "claim_retry", read.TaskID, read, o, Call{}, func(u *update) {
		u.set("state_shard", str(l.StateShard(StateRunning, read.TaskID)))
	})
}

// TakeOver claims read, a running task whose lease expired, for a new
// attempt (row claim_takeover, at read's version): Claim's second write with
// AllowTakeover. The attempt taken over may have reached the provider: its
// outcome stays open (Task.OpenUncertainty, since its lease's end) and its
// history says unknown. Errors: as Claim's.
func (l *Ledger) TakeOver(ctx context.Context, read *Task, o ClaimOptions) (*Task, error) {
	c := Call{Kind: o.TakeoverKind, Version: read.AssignmentVersion}
	return l.claim(ctx, "claim_takeover", read.TaskID, read, o, c, func(u *update) {
		u.setIfAbsent("open_unknown_ms", num(read.LeaseUntil))
		u.attempt = read
		recordAttempt(u, OutcomeUnknown, ReasonUnknown, read.LeaseUntil)
	})
}

// claim sends row op for c as a claim of taskID, its update completed by
// set: Claim's first write (read nil), or a second one of read, unsent when
// read does not allow it; refused, Claim's first write is written again as
// ClaimRetry or TakeOver. due_at and state_shard stay: no index write
// (doc.go, "States and retention"). claim_retry moves the entry to active,
// where a worker dead before its first heartbeat is found at once.
func (l *Ledger) claim(ctx context.Context, op, taskID string, read *Task, o ClaimOptions, c Call, set func(*update)) (*Task, error) {
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	c.Now = l.cfg.Now().UTC()
	tr := row(op)
	if read != nil && !tr.Allows(read, c) {
		return nil, whyNotClaimable(taskID, read, tr, &c)
	}
	u := newUpdate()
	u.set("state", strState(StateRunning))
	u.set("lease_owner", str(o.Owner))
	u.set("lease_until", num(c.Now.Add(o.Lease).UnixMilli()))
	u.stamp(c.Now)
	u.remove("not_before")
	if set != nil {
		set(u)
	}
	t, old, err := l.attempt(ctx, "claim", taskID, tr.condition(u, &c))
	switch {
	case err != nil:
		return nil, err
	case t != nil && t.DueAt > t.LeaseUntil+o.Lease.Milliseconds():
		// The kept dispatch deadline (backed off by a re-send, or a dispatch
		// timeout of several leases) lies over a lease past the lease's end:
		// renew as the first heartbeat would, so a worker dying before it is
		// found in time; failed, the heartbeat retries. None at the defaults.
		if r, rerr := l.Renew(ctx, taskID, t.AssignmentVersion, o.Lease, WithAgeDeadline(t.DeadlineMs)); rerr == nil {
			return r, nil
		}
		return t, nil
	case t != nil:
		return t, nil
	case read == nil && old != nil && old.State == StateRetryWait:
		return l.ClaimRetry(ctx, old, o)
	case read == nil && old != nil && o.AllowTakeover && old.State == StateRunning:
		return l.TakeOver(ctx, old, o)
	}
	return nil, whyNotClaimable(taskID, old, tr, &c)
}

// ReasonContended: the task looked claimable when re-read; another writer
// changed it in between. Retry later.
const ReasonContended = "contended"

// whyNotClaimable names the first of the claim's guards (tr's, for c)
// that t fails, the state first; none: contended.
func whyNotClaimable(taskID string, t *Task, tr *Transition, c *Call) *NotClaimableError {
	e := &NotClaimableError{TaskID: taskID, Task: t, Reason: ReasonContended}
	switch {
	case t == nil:
		e.Reason = ReasonNotFound
	case t.State.Terminal():
		e.Reason = ReasonTerminal
	case t.State == StateNeedsReview, t.State == StateAwaitingApproval:
		e.Reason = ReasonParked // a person decides next
	case t.State == StateUnknown:
		e.Reason = ReasonUnknown
	case t.State == StateRunning && !gLeaseExpired.holds(t, c):
		e.Reason = ReasonLeased
	case !gAttemptsLeft.holds(t, c):
		e.Reason, e.Budget = ReasonBudgetExhausted, "max_attempts"
	case !gBeforeDeadline.holds(t, c):
		e.Reason, e.Budget = ReasonBudgetExhausted, "max_age"
	case t.State == StateRunning && c.Version != 0 && t.AssignmentVersion != c.Version:
		// Contended: a takeover (TakeOver) at a version another takeover
		// replaced, whose lease lapsed too: a lost race, not the reconciler's
		// business.
	case t.State == StateRunning && !tr.Allows(t, *c):
		e.Reason = ReasonExpiredLease // no takeover, or not of its kind
	case t.State == StateRetryWait && !gDue.holds(t, c):
		e.Reason = ReasonNotDue
	}
	return e
}

// fencedBy is the FencedError of a write at version that found the task
// as old (nil: gone): which of the fence and the no-result guard it fails.
func fencedBy(taskID string, version int64, old *Task) *FencedError {
	fe := &FencedError{TaskID: taskID, Version: version, Current: old}
	switch {
	case old == nil:
		fe.Why = "gone"
	case old.AssignmentVersion != version:
		fe.Why = "taken_over"
	case old.State == StateCompleted || old.HasResult():
		fe.Why = "already_completed"
	default:
		fe.Why = "not_running"
	}
	return fe
}

// fenced sends row op for the caller's assignment version; set fills its
// update at the ledger's clock.
func (l *Ledger) fenced(ctx context.Context, op, taskID string, version int64, opts []WriteOption, set func(u *update, now time.Time)) (*Task, error) {
	now := l.cfg.Now().UTC()
	u := newUpdate().with(opts)
	set(u, now)
	return l.write(ctx, op, row(op), taskID, &Call{Now: now, Version: version}, u)
}

// write stamps u and sends it as tr for c — its "_after_refusal" twin after
// AfterRefusal; with follow-ups or u.tx, its "_follow_ups" twin in a
// transaction (writeTx) — label naming it in errors. A refusal is a
// *FencedError at the version the fence compares. A completion that cannot
// fit (update.fits) is refused unsent; a task left queued is due no later
// than its age deadline (clampDue).
func (l *Ledger) write(ctx context.Context, label string, tr *Transition, taskID string, c *Call, u *update) (*Task, error) {
	u.stamp(c.Now)
	if tw, ok := byOp[tr.Op+"_after_refusal"]; ok && u.refused {
		tr = tw
	}
	if fs := u.followUps[tr.To]; len(fs) > 0 || u.tx != nil {
		return l.writeTx(ctx, label, followUpTwin(tr), taskID, c, u, fs)
	}
	if err := tr.condition(u, c).fits(l.cfg.TasksTable, taskID, strings.ReplaceAll(label, "_", " ")); err != nil {
		return nil, err
	}
	t, old, err := l.attempt(ctx, label, taskID, u)
	switch {
	case t != nil && tr.To == StateQueued:
		return l.clampDue(ctx, t)
	case t != nil || err != nil:
		return t, err
	}
	return nil, fencedBy(taskID, c.Version, old)
}

// Renew extends the lease of the caller's assignment. Errors: *FencedError
// when the caller no longer holds it (stop the provider call, save nothing).
// Given the age deadline (WithAgeDeadline), due_at rounds up to a multiple
// of lease (runningDue), so two in three heartbeat renewals (every lease/3)
// keep the by_state key: one index write, not two. The reconciler acts only
// on an expired lease, so this delays finding a dead worker by at most a
// lease, never past the age deadline.
func (l *Ledger) Renew(ctx context.Context, taskID string, version int64, lease time.Duration, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "renew", taskID, version, opts, func(u *update, now time.Time) { renewLease(u, now, lease) })
}

// renewLease sets u's lease to end at now + lease, due_at as runningDue
// places it.
func renewLease(u *update, now time.Time, lease time.Duration) {
	until := now.Add(lease).UnixMilli()
	u.set("lease_until", num(until))
	u.set("due_at", num(runningDue(until, lease, u.deadlineMs)))
}

// runningDue is the due_at of a running task whose lease ends at untilMs:
// the next multiple of lease at or after it while that is at or before the
// age deadline (deadlineMs); else, and without a deadline or a lease under
// a millisecond, untilMs — so a dead worker's task is still found within
// the age budget plus one reconciler period.
func runningDue(untilMs int64, lease time.Duration, deadlineMs int64) int64 {
	if step := lease.Milliseconds(); step > 0 && deadlineMs > 0 {
		if d := (untilMs + step - 1) / step * step; d <= deadlineMs {
			return d
		}
	}
	return untilMs
}

// MarkCallStarted records, immediately before the provider call, that the
// caller's assignment makes it (call_started_version = version): for a
// provider without idempotency keys, the reconciler then tells a worker that
// died before its call (re-queue) from one that may have reached the
// provider (unknown). The reconciler trusts a readback's "not found" for a
// marked call only after the lease end plus the call timeout, so the mark
// needs at least lease/2 of the lease left, and leaves it and the index as
// they are; a shorter lease (renewals failed) is renewed by a second write
// with the mark. Errors: *FencedError (do not call the provider).
func (l *Ledger) MarkCallStarted(ctx context.Context, taskID string, version int64, lease time.Duration, opts ...WriteOption) (*Task, error) {
	now := l.cfg.Now().UTC()
	c := &Call{Now: now, Version: version, Lease: lease}
	mark := func() *update {
		u := newUpdate().with(opts)
		u.set("call_started_version", num(version))
		u.set("call_started_ms", num(now.UnixMilli()))
		return u
	}
	t, err := l.write(ctx, "call_started", row("call_started"), taskID, c, mark())
	var fe *FencedError
	if !errors.As(err, &fe) || !row("call_started_renew").Allows(fe.Current, *c) || fe.Current.HasResult() {
		return t, err
	}
	u := mark()
	renewLease(u, now, lease)
	return l.write(ctx, "call_started", row("call_started_renew"), taskID, c, u)
}

// Completion is the saved outcome of a successful generation.
type Completion struct {
	Result      string      // JSON
	ResultRef   *PayloadRef // saved instead of Result: placed in S3 first (results/<task>/<created_ms>/<version>)
	Provider    string
	ProviderRef string
	ReadbackAt  time.Time // set when the result came from a provider readback
	// ApprovalTTL > 0 says the task has an approval gate (Task.ApprovalTTL):
	// the task lands in awaiting_approval, due at now + ApprovalTTL (DESIGN
	// §10). The write is conditioned on the item agreeing.
	ApprovalTTL time.Duration
	// FollowUps are the tasks every completion of the result creates with
	// it, by the state it leaves the task in (see WithFollowUps).
	FollowUps map[State][]NewTask
}

// Complete saves the result of the caller's assignment, running or unknown at
// its version (the reconciler expired a slow worker's lease: no other
// attempt has started, so the result settles it), with no result yet.
// Errors: *FencedError with Why = already_completed / taken_over /
// not_running / gone (never retry it blindly); *ItemTooLargeError when the
// item would exceed DynamoDB's limit (nothing written; see CheckCompletion).
func (l *Ledger) Complete(ctx context.Context, taskID string, version int64, c Completion, opts ...WriteOption) (*Task, error) {
	return l.complete(ctx, "complete", taskID, version, c, opts)
}

// CompleteFromReadback completes a task in state unknown with a result the
// provider returned on Lookup, at the version the reconciler read.
func (l *Ledger) CompleteFromReadback(ctx context.Context, taskID string, version int64, c Completion, opts ...WriteOption) (*Task, error) {
	if c.ReadbackAt.IsZero() {
		c.ReadbackAt = l.cfg.Now()
	}
	return l.complete(ctx, "complete_readback", taskID, version, c, opts)
}

// complete sends op (its "_gated" twin, as c says) for the caller's
// assignment; a caller that misjudged the approval gate (the item satisfies
// the other twin) is corrected once from the item.
func (l *Ledger) complete(ctx context.Context, op, taskID string, version int64, c Completion, opts []WriteOption) (*Task, error) {
	now := l.cfg.Now().UTC()
	call := &Call{Now: now, Version: version}
	u := newUpdate().with(opts)
	l.completion(u, taskID, c, now)
	t, err := l.write(ctx, "complete", gated(op, c.ApprovalTTL > 0), taskID, call, u)
	var fe *FencedError
	if errors.As(err, &fe) && gated(op, c.ApprovalTTL <= 0).Allows(fe.Current, *call) {
		c.ApprovalTTL = fe.Current.ApprovalTTL()
		return l.complete(ctx, op, taskID, version, c, opts)
	}
	return t, err
}

func gated(op string, gate bool) *Transition {
	return row(op + pick(gate, "_gated", ""))
}

// completion sets on u what saves c: the result (inline or its
// reference), its hash, completed_ms, the state — completed, or behind an
// approval gate (c.ApprovalTTL > 0) awaiting_approval, indexed with due_at
// = the approval deadline — and the provider fields; c's follow-ups.
func (l *Ledger) completion(u *update, taskID string, c Completion, now time.Time) {
	if c.FollowUps != nil {
		u.followUps = c.FollowUps
	}
	u.result = setResult(u, c)
	u.set("result_sha256", str(c.resultSHA256()))
	u.set("completed_ms", num(now.UnixMilli()))
	if c.ApprovalTTL > 0 {
		deadline := now.Add(c.ApprovalTTL).UnixMilli()
		l.live(u, StateAwaitingApproval, taskID, deadline)
		u.remove("lease_owner", "lease_until", "not_before")
		u.set("approval_state", str(ApprovalPending))
		u.set("approval_deadline_ms", num(deadline))
	} else {
		l.off(u, StateCompleted, now)
	}
	for attr, v := range map[string]string{"provider": c.Provider, "provider_ref": c.ProviderRef} {
		if v != "" {
			u.set(attr, str(v))
		}
	}
	if !c.ReadbackAt.IsZero() {
		u.set("readback_at", str(rfc3339(c.ReadbackAt)))
	}
}

// fits returns an *ItemTooLargeError (op) when u saves a result
// (u.result >= 0) and the key and the values it sets — a lower bound of
// the item's size — alone exceed DynamoDB's item limit.
func (u *update) fits(table, taskID, op string) error {
	if u.result < 0 {
		return nil
	}
	in := u.input(table, taskID)
	if n := itemsize.UpdateLowerBound(in.Key, *in.UpdateExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues); n > itemsize.MaxItemBytes {
		return &ItemTooLargeError{TaskID: taskID, Op: op, Bytes: n, ResultBytes: u.result, Limit: itemsize.MaxItemBytes}
	}
	return nil
}

// ScheduleRetry moves the caller's assignment to retry_wait until notBefore;
// with AfterRefusal, from unknown at the caller's version too.
// Errors: *FencedError.
func (l *Ledger) ScheduleRetry(ctx context.Context, taskID string, version int64, notBefore time.Time, errClass, errMsg string, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "retry", taskID, version, opts, func(u *update, now time.Time) {
		l.retryWait(u, taskID, notBefore)
		setError(u, errClass, errMsg)
		recordAttempt(u, OutcomeRetry, errClass, now.UnixMilli())
		u.remove("lease_owner", "lease_until")
	})
}

// ScheduleRetryUncertain is ScheduleRetry for an attempt whose outcome is
// unknown (reply lost, call timed out) but whose repeat is safe: the
// provider deduplicates by operation id, so the repeat collects what the
// call generated. Until then the outcome stays open since now
// (Task.OpenUncertainty). Its history says retry after unknown_outcome, not
// unknown: its worker saw the call end, so none of it can still reach the
// provider (WorkerEndedOpenOutcome). Errors: *FencedError.
func (l *Ledger) ScheduleRetryUncertain(ctx context.Context, taskID string, version int64, notBefore time.Time, errMsg string, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "retry_uncertain", taskID, version, opts, func(u *update, now time.Time) {
		l.retryWait(u, taskID, notBefore)
		setError(u, ReasonUnknown, errMsg)
		u.setIfAbsent("open_unknown_ms", num(now.UnixMilli()))
		recordAttempt(u, OutcomeRetry, ReasonUnknown, now.UnixMilli())
		u.remove("lease_owner", "lease_until")
	})
}

// WorkerEndedOpenOutcome reports whether t's open outcome (OpenUnknownMs)
// was left by a worker that saw its call end (ScheduleRetryUncertain: a
// retry after unknown_outcome, ended then), not by an attempt whose lease
// lapsed (Requeue, TakeOver: unknown at the lease's end): no call of that
// attempt can still be running.
func (t *Task) WorkerEndedOpenOutcome() bool {
	return t.OpenUnknownMs > 0 && slices.ContainsFunc(t.History(), func(a AttemptRecord) bool {
		return a.Outcome == OutcomeRetry && a.ErrorClass == ReasonUnknown && a.EndedMs == t.OpenUnknownMs
	})
}

func (l *Ledger) retryWait(u *update, taskID string, notBefore time.Time) {
	l.live(u, StateRetryWait, taskID, notBefore.UnixMilli())
	u.set("not_before", num(notBefore.UnixMilli()))
}

// Fail ends the caller's assignment as failed (the caller's input is at
// fault); with AfterRefusal, from unknown at the caller's version too.
// Errors: *FencedError.
func (l *Ledger) Fail(ctx context.Context, taskID string, version int64, errClass, errMsg string, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "fail", taskID, version, opts, func(u *update, now time.Time) {
		l.off(u, StateFailed, now)
		setError(u, errClass, errMsg)
	})
}

// MarkUnknown records that the attempt's outcome is uncertain; the
// reconciler resolves it by provider readback. Errors: *FencedError.
func (l *Ledger) MarkUnknown(ctx context.Context, taskID string, version int64, errClass, errMsg string, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "unknown", taskID, version, opts, func(u *update, now time.Time) {
		l.live(u, StateUnknown, taskID, now.UnixMilli())
		setError(u, errClass, errMsg)
		recordAttempt(u, OutcomeUnknown, errClass, now.UnixMilli())
		u.remove("lease_owner", "lease_until")
	})
}

// Release gives back the caller's assignment before the provider was called
// (the Lambda deadline is near, or a request provably never left the
// process): queued again, due for dispatch, attempts - 1. The assignment
// version stays incremented, so the holder stays fenced. Errors: *FencedError.
func (l *Ledger) Release(ctx context.Context, taskID string, version int64, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "release", taskID, version, opts, func(u *update, now time.Time) {
		l.giveBack(u, taskID, now)
		u.remove("lease_owner", "lease_until")
	})
}

// ErrorCallNotStarted is the error class of a task given back from unknown
// (ReleaseUnknown) or from an unknown_outcome park (ReleaseLapsed): no
// provider call was made under its assignment.
const ErrorCallNotStarted = "call_not_started"

// CallNotStartedMessage says why (ErrorCallNotStarted).
const CallNotStartedMessage = "no provider call was made under this assignment; its lease had lapsed before the worker gave it back; re-queued"

// ReleaseUnknown gives back the caller's assignment from unknown: its lease
// expired (the worker was slow, not gone) before its provider call, and the
// worker knows none was made. Queued again like Release, its uncertainty
// void: error ErrorCallNotStarted, not unknown_outcome, which a later park
// would repeat as "may have reached the provider", and what a re-queued
// lapse recorded before AwaitReadback moved it here is void (voidLapse).
// Refused once the attempt is no longer counted (row release_unknown): a
// Release repeated after its lost reply, finding the task moved to unknown
// at its version, must not give back an earlier attempt's count.
// Errors: *FencedError.
func (l *Ledger) ReleaseUnknown(ctx context.Context, taskID string, version int64, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "release_unknown", taskID, version, opts, func(u *update, now time.Time) {
		l.giveBack(u, taskID, now)
		voidLapse(u)
		u.remove("lease_owner", "lease_until")
	})
}

// ReleaseRequeued gives back the caller's assignment, re-queued after its
// lease lapsed (RequeuedAt: its attempt still counted, no readback's "not
// found" since, which settled every attempt's outcome), when the worker
// knows it made no provider call under it: the attempt is given back and
// what the lapse recorded of it is void — history entry, open outcome,
// error (voidLapse) — while an earlier attempt's, as its
// claim read it (InAttempt), stands. Without InAttempt only the attempt is
// given back. Errors: *FencedError.
func (l *Ledger) ReleaseRequeued(ctx context.Context, taskID string, version int64, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "release_requeued", taskID, version, opts, func(u *update, now time.Time) {
		l.giveBack(u, taskID, now)
		if u.attempt != nil {
			voidLapse(u)
		}
	})
}

// voidLapse voids on u what a lapse recorded of an attempt that made no
// provider call (its worker knows): error ErrorCallNotStarted, not the
// unknown_outcome its expired lease was given, and open_unknown_ms and
// attempt_log as the caller's claim read them (InAttempt): every write at
// the assignment's version since the claim was of this attempt (another
// claim changes the version), so whatever it left open or recorded is
// void. An earlier attempt's unknown_outcome, which the claim carried,
// stands (keepOpenOutcome): it may have reached the provider, and a later
// park must still say so.
func voidLapse(u *update) {
	keepOpenOutcome(u)
	a := u.attempt
	if a != nil && a.ErrorClass == ReasonUnknown {
		setError(u, a.ErrorClass, a.ErrorMessage)
	} else {
		setError(u, ErrorCallNotStarted, CallNotStartedMessage)
	}
	if a == nil {
		return
	}
	if a.OpenUnknownMs == 0 {
		u.remove("open_unknown_ms")
	}
	if u.remove("attempt_log"); len(a.AttemptLog) > 0 {
		u.set("attempt_log", strList(a.AttemptLog))
	}
}

// RequeuedAt reports whether t is queued at assignment version with its
// attempt still counted and nothing given back or read back absent since
// (ReleaseRequeued's condition): re-queued after its lease lapsed.
func RequeuedAt(t *Task, version int64) bool {
	return row("release_requeued").Allows(t, Call{Version: version})
}

// keepOpenOutcome keeps the open outcome of an attempt before the
// caller's (open_unknown_ms, from the task it claimed: InAttempt) on a
// write that leaves the task live: a park (a lapsed settlement's) cleared
// it, and this attempt's answer does not settle that one's question.
func keepOpenOutcome(u *update) {
	if a := u.attempt; a != nil && a.OpenUnknownMs > 0 {
		u.setIfAbsent("open_unknown_ms", num(a.OpenUnknownMs))
	}
}

// giveBack queues the task again, due for dispatch; its row gives the
// attempt back, as no provider call was made under the assignment.
func (l *Ledger) giveBack(u *update, taskID string, now time.Time) {
	l.live(u, StateQueued, taskID, now.Add(l.cfg.DispatchTimeout).UnixMilli())
}

// ReleaseClaim gives back a claim whose reply was lost and whose write_nonce
// read failed, so the caller does not know its version: found running under
// owner (at version, when > 0), the task is queued again, its attempt given
// back. owner must be unique to the claim ("<request id>/<message id>").
// ok=false with a nil error: not running under owner; nothing written.
func (l *Ledger) ReleaseClaim(ctx context.Context, taskID, owner string, version int64) (t *Task, ok bool, err error) {
	if owner == "" {
		return nil, false, fmt.Errorf("ledger: ReleaseClaim %s: owner is required", taskID)
	}
	now := l.cfg.Now().UTC()
	u := newUpdate()
	l.giveBack(u, taskID, now)
	u.remove("lease_owner", "lease_until")
	u.stamp(now)
	if t, _, err = l.attempt(ctx, "release_claim", taskID, row("release_claim").condition(u, &Call{Now: now, Version: version, Owner: owner})); t == nil {
		return nil, false, err
	}
	if ct, cerr := l.clampDue(ctx, t); cerr == nil { // failed: due_at stays at the dispatch timeout
		t = ct
	}
	return t, true, nil
}

// Requeue moves a task from state `from` at assignment version `version`
// back to queued, due for dispatch: the reconciler's move for an expired
// lease (from running: the lease must have expired) and for an unknown
// outcome the provider credibly never saw. Errors: *FencedError.
func (l *Ledger) Requeue(ctx context.Context, taskID string, from State, version int64, opts ...WriteOption) (*Task, error) {
	if op, ok := map[State]string{StateRunning: "requeue", StateUnknown: "requeue_readback_absent"}[from]; ok {
		return l.requeue(ctx, taskID, op, version, opts...)
	}
	return nil, fmt.Errorf("ledger: Requeue %s from %s: only from running or unknown", taskID, from)
}

// RequeueUnstarted re-queues a running task whose lease expired and whose
// assignment marked no call start (its worker died before calling), on
// Requeue's conditions and the mark still absent, so a worker that marked
// its call meanwhile is never re-queued under it. Errors: *FencedError.
func (l *Ledger) RequeueUnstarted(ctx context.Context, taskID string, version int64) (*Task, error) {
	return l.requeue(ctx, taskID, "requeue_unstarted", version)
}

// RequeueRetrySafe re-queues an unknown task whose step is retry-safe (a
// repeat costs only money) without a readback's answer: the attempt stays
// counted; the error says its outcome was not learnt (ErrorUncertainRetried),
// not that the provider did not act. Errors: *FencedError.
func (l *Ledger) RequeueRetrySafe(ctx context.Context, taskID string, version int64) (*Task, error) {
	return l.requeue(ctx, taskID, "requeue_retry_safe", version)
}

// RequeueCallMayRun is Requeue from unknown of read (at its version) for a
// provider that deduplicates by operation id, whose readback found no record
// of the operation while a lapsed attempt's call may still reach it (until
// its lease's end plus the call timeout). The next attempt's call, under the
// same operation id, collects what that call generates, so the task need
// not wait; but "not found" settles nothing about it: the outcome stays open
// (open_unknown_ms, since read.UnknownSince()), so a budget park reads it
// back again or says the provider may have acted. The history entry says
// how the attempt ended, for the wait on a lapsed call: unknown if its lease
// lapsed (LeaseExpiredMessage kept), else a retry after unknown_outcome as
// ScheduleRetryUncertain records it (CallMayRunMessage). Errors: *FencedError.
func (l *Ledger) RequeueCallMayRun(ctx context.Context, read *Task) (*Task, error) {
	return l.requeue(ctx, read.TaskID, "requeue_readback_absent_call_may_run", read.AssignmentVersion, InAttempt(read))
}

// CallMayRunMessage is the error message of a task re-queued by
// RequeueCallMayRun.
const CallMayRunMessage = "the provider's readback found no record of the operation, but a call of an attempt whose lease lapsed may still reach the provider; re-queued: a call under the same operation id collects what it generates"

// ErrorUncertainRetried is the error class of a retry-safe task re-queued
// from unknown (RequeueRetrySafe).
const ErrorUncertainRetried = "uncertain_retried"

// ErrorReadbackAbsent is the error class of a task re-queued from unknown
// because its provider's readback credibly found no record of the operation.
const ErrorReadbackAbsent = "readback_absent"

func (l *Ledger) requeue(ctx context.Context, taskID, op string, version int64, opts ...WriteOption) (*Task, error) {
	now := l.cfg.Now().UTC()
	u := newUpdate().with(opts)
	l.giveBack(u, taskID, now)
	u.remove("lease_owner", "lease_until", "not_before")
	switch op {
	case "requeue_readback_absent":
		// The uncertainty is resolved, an earlier attempt's too (they share
		// the operation id): the error must no longer say unknown_outcome
		// (a later park would repeat "may have acted").
		setError(u, ErrorReadbackAbsent, "the provider's readback found no record of the operation; re-queued")
		u.remove("open_unknown_ms")
	case "requeue": // a deduplicating provider's call may have generated: a later park must say so
		setError(u, "unknown_outcome", LeaseExpiredMessage)
		// Open since the lease's end (the caller's read, InAttempt).
		since := now.UnixMilli()
		if a := u.attempt; a != nil && a.LeaseUntil > 0 && a.LeaseUntil < since {
			since = a.LeaseUntil
		}
		u.setIfAbsent("open_unknown_ms", num(since))
		recordAttempt(u, OutcomeUnknown, ReasonUnknown, since) // its history says so, not "not recorded"
	case "requeue_readback_absent_call_may_run":
		since, outcome := u.attempt.UnknownSince().UnixMilli(), OutcomeUnknown
		u.setIfAbsent("open_unknown_ms", num(since))
		if u.attempt.ErrorMessage != LeaseExpiredMessage {
			setError(u, ReasonUnknown, CallMayRunMessage)
			outcome = OutcomeRetry
		}
		recordAttempt(u, outcome, ReasonUnknown, since)
	case "requeue_retry_safe":
		setError(u, ErrorUncertainRetried, "the attempt's outcome was not learnt; its step is retry-safe (a repeat costs only money), so it was re-queued for another attempt")
	}
	return l.write(ctx, "requeue", row(op), taskID, &Call{Now: now, Version: version}, u)
}

// clampDue pulls a queued task's dispatch deadline (due_at) forward to its
// age deadline when the dispatch timeout would overshoot it, so the
// reconciler parks a task out of age budget within one period. A second
// write only on that edge; a failed condition means the task moved on.
func (l *Ledger) clampDue(ctx context.Context, t *Task) (*Task, error) {
	if t.State != StateQueued || t.DeadlineMs <= 0 || t.DueAt <= t.DeadlineMs {
		return t, nil
	}
	u := newUpdate()
	u.set("due_at", num(t.DeadlineMs))
	nt, err := l.apply(ctx, "clamp", t.TaskID, row("clamp_due").condition(u, &Call{DueAt: t.DueAt}))
	switch {
	case err == nil:
		return nt, nil
	case isConditionFailed(err):
		return t, nil
	}
	return nil, wrapErr("UpdateItem clamp", err)
}

// DispatchBackoff is how long the outbox waits for the message of the
// dispatch numbered n (0: the submit's own send) to be consumed before the
// next re-send: DispatchTimeout × 2^n, capped at DispatchBackoffCap, so a
// backlog costs a logarithmic number of duplicate messages.
func (l *Ledger) DispatchBackoff(n int) time.Duration {
	d := l.cfg.DispatchTimeout
	for i := 0; i < n && d < l.cfg.DispatchBackoffCap; i++ {
		d *= 2
	}
	return min(d, l.cfg.DispatchBackoffCap)
}

// ClaimDispatch is the outbox relay's lock: conditioned on the state,
// due_at and dispatch count of t (as read), queued or retry_wait, it counts
// the dispatch and moves due_at to now + DispatchBackoff(t.Dispatches+1),
// clamped to the age deadline: only the caller whose update succeeds sends
// the SQS message. ok=false: someone else moved it, or it was not in t's
// state (the index does not project it: an active entry is tried as
// queued); nt is then the task as the refusal found it, nil when gone.
func (l *Ledger) ClaimDispatch(ctx context.Context, t *Task) (nt *Task, ok bool, err error) {
	return l.claimDispatch(ctx, t, l.DispatchBackoff(t.Dispatches+1))
}

// DeferDispatch is ClaimDispatch for a re-send the relay holds back because
// the queue's backlog most likely holds the task's message: due_at moves to
// now + DispatchBackoffCap, or half the time left to the age deadline if
// sooner, so a consumer outage shorter than that re-sends nothing (a
// duplicate would queue behind the same backlog), and a send really lost
// still goes with half its age budget left.
func (l *Ledger) DeferDispatch(ctx context.Context, t *Task) (nt *Task, ok bool, err error) {
	wait := l.cfg.DispatchBackoffCap
	if t.DeadlineMs > 0 {
		wait = max(min(wait, time.UnixMilli(t.DeadlineMs).Sub(l.cfg.Now())/2), 0)
	}
	return l.claimDispatch(ctx, t, wait)
}

func (l *Ledger) claimDispatch(ctx context.Context, t *Task, wait time.Duration) (nt *Task, ok bool, err error) {
	now := l.cfg.Now().UTC()
	due := now.Add(wait).UnixMilli()
	if t.DeadlineMs > 0 {
		due = min(due, t.DeadlineMs)
	}
	u := newUpdate()
	u.set("due_at", num(due))
	u.set("dispatches", num(int64(t.Dispatches+1)))
	u.stamp(now)
	nt, old, err := l.attempt(ctx, "dispatch", t.TaskID, row("dispatch").condition(u, &Call{Now: now, State: t.State, DueAt: t.DueAt, Dispatches: t.Dispatches}))
	if err != nil {
		return nil, false, wrapErr("UpdateItem dispatch", err)
	}
	return cmp.Or(nt, old), nt != nil, nil
}

// Cancel cancels a queued or retry_wait task. Cancelling a cancelled task
// returns it unchanged. Errors: ErrNotFound, *ConflictError (any other state).
func (l *Ledger) Cancel(ctx context.Context, taskID string) (*Task, error) {
	now := l.cfg.Now().UTC()
	u := newUpdate()
	l.off(u, StateCancelled, now)
	t, _, err := l.decideOne(ctx, "cancel", taskID, &Call{Now: now}, u)
	return t, err
}

// decideOne stamps u and sends it as row op for c, a write by another actor
// than the assignment's holder. Refused: ErrNotFound; the task as found
// with repeat=true when a Repeat row finds its to-state already; else a
// *ConflictError.
func (l *Ledger) decideOne(ctx context.Context, op, taskID string, c *Call, u *update) (t *Task, repeat bool, err error) {
	tr := row(op)
	u.stamp(c.Now)
	t, old, err := l.attempt(ctx, op, taskID, tr.condition(u, c))
	switch {
	case t != nil || err != nil:
		return t, false, err
	case old == nil:
		return nil, false, &notFound{taskID}
	case tr.Repeat && old.State == tr.To:
		return old, true, nil
	}
	return nil, false, conflict(op, taskID, old)
}

type notFound struct{ id string }

func (e *notFound) Error() string { return "ledger: task " + e.id + ": not found" }
func (e *notFound) Unwrap() error { return ErrNotFound }

// MaxErrorMessage caps stored error messages (bytes).
const MaxErrorMessage = 1024

func setError(u *update, class, msg string) {
	u.set("error_class", str(class))
	u.set("error_message", str(truncate(msg, MaxErrorMessage)))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// cut on a rune boundary
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// ExpireToUnknown moves a running task whose lease expired (the worker is
// gone, maybe mid-call) to unknown, for a step whose provider does not
// honour idempotency keys: re-running it could act twice, so the reconciler
// reads the provider back instead. Given the caller's read (InAttempt),
// unknown_since is its lease's end, not this write's later time: the wait
// for a call that may still run counts from there. Errors: *FencedError.
func (l *Ledger) ExpireToUnknown(ctx context.Context, taskID string, version int64, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "expire", taskID, version, opts, func(u *update, now time.Time) {
		l.live(u, StateUnknown, taskID, now.UnixMilli())
		setError(u, "unknown_outcome", LeaseExpiredMessage)
		u.remove("lease_owner", "lease_until")
		if a := u.attempt; a != nil && a.LeaseUntil > 0 && a.LeaseUntil < now.UnixMilli() {
			u.set("unknown_since", num(a.LeaseUntil))
		}
	})
}

// AwaitReadback moves a queued or retry_wait task whose budgets are spent to
// unknown, its error kept, when an earlier attempt's outcome is open
// (Task.OpenUncertainty): the provider's readback then decides what a park
// would leave open — a result found completes it, "not found" parks it
// saying nothing was generated. since (OpenUncertainty's) becomes its
// unknown_since. No worker holds the task, so only the version read is
// fenced. Errors: *FencedError.
func (l *Ledger) AwaitReadback(ctx context.Context, taskID string, version int64, since time.Time) (*Task, error) {
	return l.fenced(ctx, "await_readback", taskID, version, nil, func(u *update, now time.Time) {
		l.live(u, StateUnknown, taskID, now.UnixMilli())
		u.remove("not_before")
		u.set("unknown_since", num(since.UnixMilli()))
	})
}

// OpenUncertainty reports whether an attempt of t's may have reached the
// provider with no answer recorded since, and since when: its error says
// unknown_outcome (since it became unknown), or an earlier attempt's
// outcome stays open (OpenUnknownMs).
func (t *Task) OpenUncertainty() (time.Time, bool) {
	switch {
	case t.OpenUnknownMs > 0:
		return time.UnixMilli(t.OpenUnknownMs).UTC(), true
	case t.ErrorClass == ReasonUnknown:
		return t.UnknownSince(), true
	}
	return time.Time{}, false
}

// DeferReadback moves an unknown task whose readback gave no answer (it
// failed, or the run's budget cut it) behind the unknown tasks still
// waiting, so readbacks hanging at a stream's head cannot starve the rest:
// due_at becomes due, the reconciler's run start — after every due_at that
// run found due, yet early enough for the next run to find it Settle old.
// since (UnknownSince as read) is kept in unknown_since, for the review and
// the wait on a fenced call. The version is unchanged: a slow worker may
// still save its result. Errors: *FencedError.
func (l *Ledger) DeferReadback(ctx context.Context, taskID string, version int64, since, due time.Time) (*Task, error) {
	return l.fenced(ctx, "defer_readback", taskID, version, nil, func(u *update, now time.Time) {
		u.set("due_at", num(due.UnixMilli()))
		u.set("unknown_since", num(since.UnixMilli()))
	})
}

// UnknownSince is when t's outcome became uncertain: the end of the lease
// for an attempt whose worker vanished, else the due_at it entered unknown
// with (unknown_since once DeferReadback moved it). After a cancel while
// running that due_at is the fenced lease's end (or the cancel's time, if
// that lease had already ended): CancelRunning removes lease_until.
func (t *Task) UnknownSince() time.Time {
	switch {
	case t.UnknownSinceMs > 0:
		return time.UnixMilli(t.UnknownSinceMs).UTC()
	case t.LeaseUntil > 0 && t.LeaseUntil < t.DueAt:
		return time.UnixMilli(t.LeaseUntil).UTC()
	case t.DueAt > 0:
		return time.UnixMilli(t.DueAt).UTC()
	}
	return time.UnixMilli(t.UpdatedMs).UTC()
}

// CheckCompletion returns an *ItemTooLargeError when the item t (as the
// caller read it) would become when completed with c exceeds DynamoDB's
// item limit: check before Complete, which could only fail.
func CheckCompletion(t *Task, c Completion) error {
	n, err := CompletedItemSize(t, c)
	if err == nil && n > itemsize.MaxItemBytes {
		return &ItemTooLargeError{TaskID: t.TaskID, Op: "complete", Bytes: n, ResultBytes: len(c.Result), Limit: itemsize.MaxItemBytes}
	}
	return err
}

// CompletedItemSize returns the size (DynamoDB's rules, package itemsize)
// of the item t would become when completed with c.
func CompletedItemSize(t *Task, c Completion) (int, error) {
	x := *t
	x.State, x.Result, x.ResultRef, x.ResultSHA256 = StateCompleted, c.Result, c.ResultRef, c.resultSHA256()
	if c.ResultRef != nil {
		x.Result = ""
	}
	if c.ApprovalTTL > 0 {
		x.State, x.ApprovalState, x.ApprovalDeadlineMs = StateAwaitingApproval, ApprovalPending, 1<<41-1
	}
	x.CompletedMs, x.UpdatedMs, x.ExpiresAt = 1<<41-1, 1<<41-1, 1<<33-1
	x.Provider, x.ProviderRef = cmp.Or(c.Provider, x.Provider), cmp.Or(c.ProviderRef, x.ProviderRef)
	if !c.ReadbackAt.IsZero() {
		x.ReadbackAt = "2006-01-02T15:04:05.999999999Z" // the widest RFC 3339 stamp
	}
	x.StateShard, x.DueAt, x.LeaseOwner, x.LeaseUntil, x.NotBefore = "", 0, "", 0, 0
	x.UnknownSinceMs, x.OpenUnknownMs = 0, 0
	x.WriteNonce = NewNonce()
	item, err := attributevalue.MarshalMap(&x)
	if err != nil {
		return 0, fmt.Errorf("ledger: encode task: %w", err)
	}
	return itemsize.Item(item), nil
}
