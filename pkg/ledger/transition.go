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
	// AllowTakeover also claims a running task whose lease expired, safe only
	// when the provider dedupes by operation id; TakeoverKind limits it to
	// one kind (a deliver task's lapse is the reconciler's to resolve).
	AllowTakeover bool
	TakeoverKind  string
}

// Claim takes the task for one attempt (row claim): running, fencing token and
// attempts +1, leased to o.Owner; refused by a retry_wait task, ClaimRetry; with
// AllowTakeover, by an expired lease, TakeOver. Errors: *NotClaimableError, *ThrottledError.
func (l *Ledger) Claim(ctx context.Context, taskID string, o ClaimOptions) (*Task, error) {
	return l.claim(ctx, "claim", taskID, nil, o, Call{}, func(*update) {})
}

// ClaimRetry claims read, a retry_wait task (row claim_retry). Errors: as Claim's.
func (l *Ledger) ClaimRetry(ctx context.Context, read *Task, o ClaimOptions) (*Task, error) {
	return l.claim(ctx, "claim_retry", read.TaskID, read, o, Call{}, func(u *update) {
		u.set("state_shard", str(l.StateShard(StateRunning, read.TaskID)))
	})
}

// TakeOver claims read, a running task whose lease expired, at its version (row
// claim_takeover), the attempt taken over open since its lease's end. Errors: as Claim's.
func (l *Ledger) TakeOver(ctx context.Context, read *Task, o ClaimOptions) (*Task, error) {
	c := Call{Kind: o.TakeoverKind, Version: read.AssignmentVersion}
	return l.claim(ctx, "claim_takeover", read.TaskID, read, o, c, func(u *update) {
		u.setIfAbsent("open_unknown_ms", num(read.LeaseUntil))
		u.attempt = read
		recordAttempt(u, OutcomeUnknown, ReasonUnknown, read.LeaseUntil)
	})
}

// claim sends row op for c, set completing its update: Claim's first write
// (read nil), or a second one of read, unsent unless read allows it.
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
	set(u)
	t, old, err := l.attempt(ctx, "claim", taskID, tr.condition(u, &c))
	switch {
	case err != nil:
		return nil, err
	case t != nil && t.DueAt > t.LeaseUntil+o.Lease.Milliseconds():
		// The kept dispatch deadline lies over a lease past the lease's end
		// (never at the defaults): renew now, so a worker dead before its
		// first heartbeat is found in time (failed: the heartbeat retries).
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

// ReasonContended: another writer changed the task between reads. Retry later.
const ReasonContended = "contended"

// whyNotClaimable names the first of the claim's guards (tr's, for c) that
// t fails, the state first; none: contended.
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
		// Contended: a takeover at a version another takeover replaced, whose
		// lease lapsed too, lost a race; not the reconciler's business.
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

// fenced sends row op at the caller's version, set filling its update.
func (l *Ledger) fenced(ctx context.Context, op, taskID string, version int64, opts []WriteOption, set func(u *update, now time.Time)) (*Task, error) {
	now := l.cfg.Now().UTC()
	u := newUpdate().with(opts)
	set(u, now)
	return l.write(ctx, op, row(op), taskID, &Call{Now: now, Version: version}, u)
}

// write stamps u and sends it as tr for c (errors say label), as its
// "_after_refusal" twin (AfterRefusal) or "_follow_ups" one (writeTx); refused:
// *FencedError. Too large, it is refused unsent (fits); left queued, clampDue.
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

// Renew extends the caller's lease; given WithAgeDeadline, due_at rounds up to
// whole leases (runningDue): two in three heartbeats keep the by_state key, a
// dead worker is found up to a lease later. Errors: *FencedError (stop, save nothing).
func (l *Ledger) Renew(ctx context.Context, taskID string, version int64, lease time.Duration, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "renew", taskID, version, opts, func(u *update, now time.Time) { renewLease(u, now, lease) })
}

func renewLease(u *update, now time.Time, lease time.Duration) {
	until := now.Add(lease).UnixMilli()
	u.set("lease_until", num(until))
	u.set("due_at", num(runningDue(until, lease, u.deadlineMs)))
}

// runningDue is the due_at of a lease ending at untilMs: the next multiple of
// lease, unless past deadlineMs or either is unset (then untilMs): a dead
// worker's task is found in its age budget.
func runningDue(untilMs int64, lease time.Duration, deadlineMs int64) int64 {
	if step := lease.Milliseconds(); step > 0 && deadlineMs > 0 {
		if d := (untilMs + step - 1) / step * step; d <= deadlineMs {
			return d
		}
	}
	return untilMs
}

// MarkCallStarted records, right before the provider call, that the caller's
// assignment makes it: the reconciler tells a worker dead before its call
// (re-queue) from one that may have reached the provider (unknown). A readback's
// "not found" counts only after the lease's end plus the call timeout, so under
// lease/2 left a second write renews it. Errors: *FencedError (do not call).
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
	// it lands in awaiting_approval, due at now + ApprovalTTL (DESIGN §10).
	ApprovalTTL time.Duration
	FollowUps   map[State][]NewTask // created with the completion (WithFollowUps)
}

// Complete saves the result of the caller's assignment, running or unknown at
// its version (a slow worker's expired lease: no other attempt started). Errors:
// *FencedError (never retry it blindly); *ItemTooLargeError (see CheckCompletion).
func (l *Ledger) Complete(ctx context.Context, taskID string, version int64, c Completion, opts ...WriteOption) (*Task, error) {
	return l.complete(ctx, "complete", taskID, version, c, opts)
}

// CompleteFromReadback completes an unknown task, at the version the
// reconciler read, with the result the provider's readback returned.
func (l *Ledger) CompleteFromReadback(ctx context.Context, taskID string, version int64, c Completion, opts ...WriteOption) (*Task, error) {
	if c.ReadbackAt.IsZero() {
		c.ReadbackAt = l.cfg.Now()
	}
	return l.complete(ctx, "complete_readback", taskID, version, c, opts)
}

// complete sends op or its "_gated" twin, as c says; a caller that misjudged
// the gate is corrected once from the item.
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

// completion sets on u what saving c writes (behind a gate: awaiting_approval).
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

// fits returns an *ItemTooLargeError (op) when u saves a result and the key
// and values it sets, a lower bound of the item's size, exceed the limit.
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
// with AfterRefusal, from unknown at its version too. Errors: *FencedError.
func (l *Ledger) ScheduleRetry(ctx context.Context, taskID string, version int64, notBefore time.Time, errClass, errMsg string, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "retry", taskID, version, opts, func(u *update, now time.Time) {
		l.retryWait(u, taskID, notBefore)
		setError(u, errClass, errMsg)
		recordAttempt(u, OutcomeRetry, errClass, now.UnixMilli())
		u.remove("lease_owner", "lease_until")
	})
}

// ScheduleRetryUncertain is ScheduleRetry for an attempt whose outcome is
// unknown but whose repeat collects what its call generated (the provider
// dedupes by operation id); till then it stays open (OpenUncertainty).
func (l *Ledger) ScheduleRetryUncertain(ctx context.Context, taskID string, version int64, notBefore time.Time, errMsg string, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "retry_uncertain", taskID, version, opts, func(u *update, now time.Time) {
		l.retryWait(u, taskID, notBefore)
		setError(u, ReasonUnknown, errMsg)
		u.setIfAbsent("open_unknown_ms", num(now.UnixMilli()))
		recordAttempt(u, OutcomeRetry, ReasonUnknown, now.UnixMilli())
		u.remove("lease_owner", "lease_until")
	})
}

// WorkerEndedOpenOutcome reports whether t's open outcome was left by a
// worker that saw its call end (ScheduleRetryUncertain), not by a lapsed
// lease (Requeue, TakeOver): no call of that attempt can still be running.
func (t *Task) WorkerEndedOpenOutcome() bool {
	return t.OpenUnknownMs > 0 && slices.ContainsFunc(t.History(), func(a AttemptRecord) bool {
		return a.Outcome == OutcomeRetry && a.ErrorClass == ReasonUnknown && a.EndedMs == t.OpenUnknownMs
	})
}

func (l *Ledger) retryWait(u *update, taskID string, notBefore time.Time) {
	l.live(u, StateRetryWait, taskID, notBefore.UnixMilli())
	u.set("not_before", num(notBefore.UnixMilli()))
}

// Fail ends the caller's assignment as failed (its input is at fault); with
// AfterRefusal, from unknown at its version too. Errors: *FencedError.
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

// Release gives back the caller's assignment before any provider call (the
// Lambda deadline is near, or a request provably never left the process):
// queued, attempts - 1, the holder still fenced. Errors: *FencedError.
func (l *Ledger) Release(ctx context.Context, taskID string, version int64, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "release", taskID, version, opts, func(u *update, now time.Time) {
		l.giveBack(u, taskID, now)
		u.remove("lease_owner", "lease_until")
	})
}

// ErrorCallNotStarted and CallNotStartedMessage record a voided lapse (voidLapse).
const (
	ErrorCallNotStarted   = "call_not_started"
	CallNotStartedMessage = "no provider call was made under this assignment; its lease had lapsed before the worker gave it back; re-queued"
)

// ReleaseUnknown is Release from unknown: the lease of a slow worker expired
// before the call it never made. The lapse is void (voidLapse); refused once
// the attempt is no longer counted. Errors: *FencedError.
func (l *Ledger) ReleaseUnknown(ctx context.Context, taskID string, version int64, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "release_unknown", taskID, version, opts, func(u *update, now time.Time) {
		l.giveBack(u, taskID, now)
		voidLapse(u)
		u.remove("lease_owner", "lease_until")
	})
}

// ReleaseRequeued is Release of an assignment re-queued after its lapse
// (RequeuedAt) that made no call; given InAttempt, voidLapse. Errors: *FencedError.
func (l *Ledger) ReleaseRequeued(ctx context.Context, taskID string, version int64, opts ...WriteOption) (*Task, error) {
	return l.fenced(ctx, "release_requeued", taskID, version, opts, func(u *update, now time.Time) {
		l.giveBack(u, taskID, now)
		if u.attempt != nil {
			voidLapse(u)
		}
	})
}

// voidLapse undoes what a lapse recorded of an attempt that made no call:
// error ErrorCallNotStarted, not an unknown_outcome a later park would call
// "may have acted" (an earlier attempt's stands); open_unknown_ms and
// attempt_log as the claim read them (InAttempt): a claim changes the version,
// so every write at it since was this attempt's.
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

// RequeuedAt reports whether ReleaseRequeued at version would find t (row
// release_requeued): re-queued after its lease lapsed, nothing settled since.
func RequeuedAt(t *Task, version int64) bool {
	return row("release_requeued").Allows(t, Call{Version: version})
}

// keepOpenOutcome restores an earlier attempt's open outcome (InAttempt),
// which a park cleared and this attempt's answer does not settle.
func keepOpenOutcome(u *update) {
	if a := u.attempt; a != nil && a.OpenUnknownMs > 0 {
		u.setIfAbsent("open_unknown_ms", num(a.OpenUnknownMs))
	}
}

func (l *Ledger) giveBack(u *update, taskID string, now time.Time) {
	l.live(u, StateQueued, taskID, now.Add(l.cfg.DispatchTimeout).UnixMilli())
}

// ReleaseClaim gives back a claim whose reply was lost and whose write_nonce
// read failed: found running under owner (unique to the claim: "<request
// id>/<message id>"; at version, when > 0), it is queued, its attempt given
// back. ok=false, nil error: not running under owner, nothing written.
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

// Requeue moves a task from `from` at version to queued: from running, its lease
// expired; from unknown, the provider credibly never saw it. Errors: *FencedError.
func (l *Ledger) Requeue(ctx context.Context, taskID string, from State, version int64, opts ...WriteOption) (*Task, error) {
	if op, ok := map[State]string{StateRunning: "requeue", StateUnknown: "requeue_readback_absent"}[from]; ok {
		return l.requeue(ctx, taskID, op, version, opts...)
	}
	return nil, fmt.Errorf("ledger: Requeue %s from %s: only from running or unknown", taskID, from)
}

// RequeueUnstarted re-queues a running task whose lease expired with no call
// start marked (its worker died before calling), the mark still absent: a
// worker that marked its call meanwhile is never re-queued. Errors: *FencedError.
func (l *Ledger) RequeueUnstarted(ctx context.Context, taskID string, version int64) (*Task, error) {
	return l.requeue(ctx, taskID, "requeue_unstarted", version)
}

// RequeueRetrySafe re-queues an unknown task of a retry-safe step without a
// readback's answer, its attempt still counted. Errors: *FencedError.
func (l *Ledger) RequeueRetrySafe(ctx context.Context, taskID string, version int64) (*Task, error) {
	return l.requeue(ctx, taskID, "requeue_retry_safe", version)
}

// RequeueCallMayRun is Requeue from unknown of read at its version (row
// requeue_readback_absent_call_may_run) when the readback's "not found"
// proves nothing, for a provider that deduplicates (CallMayRunMessage): the
// open outcome stays, so a budget park reads back again or says the
// provider may have acted. Its history:
// unknown if the lease lapsed, else as ScheduleRetryUncertain's.
func (l *Ledger) RequeueCallMayRun(ctx context.Context, read *Task) (*Task, error) {
	return l.requeue(ctx, read.TaskID, "requeue_readback_absent_call_may_run", read.AssignmentVersion, InAttempt(read))
}

// Errors recorded by a re-queue from unknown: Requeue's, RequeueRetrySafe's and RequeueCallMayRun's.
const (
	ErrorReadbackAbsent   = "readback_absent"
	ErrorUncertainRetried = "uncertain_retried"
	CallMayRunMessage     = "the provider's readback found no record of the operation, which does not prove it did not act (a call of an attempt whose lease lapsed may still reach it, or the destination cannot prove absence); re-queued: a call under the same operation id collects what it did"
)

func (l *Ledger) requeue(ctx context.Context, taskID, op string, version int64, opts ...WriteOption) (*Task, error) {
	now := l.cfg.Now().UTC()
	u := newUpdate().with(opts)
	l.giveBack(u, taskID, now)
	u.remove("lease_owner", "lease_until", "not_before")
	switch op {
	case "requeue_readback_absent": // all attempts settled (one operation id): no later park says "may have acted"
		setError(u, ErrorReadbackAbsent, "the provider's readback found no record of the operation; re-queued")
		u.remove("open_unknown_ms")
	case "requeue": // a deduplicating provider's call may have generated: a later park must say so
		setError(u, "unknown_outcome", LeaseExpiredMessage)
		since := now.UnixMilli() // open since the lease's end (the caller's read, InAttempt)
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

// clampDue pulls a queued task's due_at forward to its age deadline, so the
// reconciler parks it within one period; a failed condition: it moved on.
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

// DispatchBackoff is how long the outbox waits for dispatch n's message (0:
// the submit's own) before re-sending: DispatchTimeout × 2^n up to
// DispatchBackoffCap, so a backlog costs a logarithmic number of duplicates.
func (l *Ledger) DispatchBackoff(n int) time.Duration {
	d := l.cfg.DispatchTimeout
	for i := 0; i < n && d < l.cfg.DispatchBackoffCap; i++ {
		d *= 2
	}
	return min(d, l.cfg.DispatchBackoffCap)
}

// ClaimDispatch is the outbox relay's lock: it counts the dispatch and moves
// due_at to now + DispatchBackoff(t.Dispatches+1), capped by the age deadline;
// only a caller whose update succeeds sends. ok=false: moved since t was read,
// or not in t's state (an active entry is tried as queued); nt: as found, nil: gone.
func (l *Ledger) ClaimDispatch(ctx context.Context, t *Task) (nt *Task, ok bool, err error) {
	return l.claimDispatch(ctx, t, l.DispatchBackoff(t.Dispatches+1))
}

// DeferDispatch is ClaimDispatch for a re-send held back because the queue's
// backlog most likely holds the message: due in DispatchBackoffCap or, if
// sooner, half the age budget left, so a shorter outage re-sends nothing (a
// duplicate queues behind the backlog) and a lost send still goes in time.
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

// Cancel cancels a queued or retry_wait task; a cancelled one is returned
// unchanged. Errors: ErrNotFound, *ConflictError (any other state).
func (l *Ledger) Cancel(ctx context.Context, taskID string) (*Task, error) {
	now := l.cfg.Now().UTC()
	u := newUpdate()
	l.off(u, StateCancelled, now)
	t, _, err := l.decideOne(ctx, "cancel", taskID, &Call{Now: now}, u)
	return t, err
}

// decideOne stamps u and sends it as row op for c. Refused: ErrNotFound; the task
// as found, repeat=true, when a Repeat row finds its to-state; else *ConflictError.
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

// truncate cuts s to n bytes on a rune boundary, marked "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// ExpireToUnknown moves a running task whose lease expired to unknown, for a
// provider without idempotency keys (a re-run could act twice); given
// InAttempt, unknown_since is the lease's end. Errors: *FencedError.
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

// AwaitReadback moves a queued or retry_wait task out of budget, an earlier
// attempt's outcome open since since, to unknown, its error kept: its readback
// then completes it, or parks it "not found". Errors: *FencedError.
func (l *Ledger) AwaitReadback(ctx context.Context, taskID string, version int64, since time.Time) (*Task, error) {
	return l.fenced(ctx, "await_readback", taskID, version, nil, func(u *update, now time.Time) {
		l.live(u, StateUnknown, taskID, now.UnixMilli())
		u.remove("not_before")
		u.set("unknown_since", num(since.UnixMilli()))
	})
}

// OpenUncertainty reports whether an attempt of t's may have reached the
// provider with no answer recorded since, and since when.
func (t *Task) OpenUncertainty() (time.Time, bool) {
	switch {
	case t.OpenUnknownMs > 0:
		return time.UnixMilli(t.OpenUnknownMs).UTC(), true
	case t.ErrorClass == ReasonUnknown:
		return t.UnknownSince(), true
	}
	return time.Time{}, false
}

// DeferReadback moves an unknown task whose readback gave no answer behind
// the others waiting (due: the run's start), so hanging readbacks cannot
// starve the rest; since (UnknownSince as read) is kept, and a slow worker
// may still save its result. Errors: *FencedError.
func (l *Ledger) DeferReadback(ctx context.Context, taskID string, version int64, since, due time.Time) (*Task, error) {
	return l.fenced(ctx, "defer_readback", taskID, version, nil, func(u *update, now time.Time) {
		u.set("due_at", num(due.UnixMilli()))
		u.set("unknown_since", num(since.UnixMilli()))
	})
}

// UnknownSince is when t's outcome became uncertain: unknown_since when a
// write set it, else the end of the lease of an attempt whose worker
// vanished, else the due_at it entered unknown with, else updated_ms.
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

// CheckCompletion returns an *ItemTooLargeError when t completed with c
// would exceed DynamoDB's item limit: check before Complete, which would fail.
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
	x.State, x.ResultRef, x.ResultSHA256 = StateCompleted, c.ResultRef, c.resultSHA256()
	x.Result = pick(c.ResultRef == nil, c.Result, "")
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
