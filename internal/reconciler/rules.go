package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// reconcileRef handles one due index entry. A queued or retry_wait task
// within its budgets needs no read: the relay's ClaimDispatch is
// conditioned on the state, due_at and dispatch count the entry carries, so
// an entry the eventually consistent index has not caught up with loses the
// condition and costs nothing (under a backlog every queued task comes due
// again and again; a GetItem each would double what the relay costs).
// Everything else is read consistently first.
func (r *run) reconcileRef(ctx context.Context, ref tasklist.LiveRef) {
	r.mu.Lock()
	r.walked[ref.TaskID] = true
	adopted := r.adopted[ref.TaskID]
	r.mu.Unlock()
	if t, ok := ref.RelayTask(); ok {
		if budgetLeft, _ := t.BudgetLeft(r.now); budgetLeft {
			r.count(func(s *Summary) { s.Examined++ })
			r.relay(ctx, t)
			return
		}
	}
	// Written by this run's watch a moment ago, and still what the index
	// entry shows (a write since — a release, an unknown outcome — moves
	// its due_at or its partition): else it is read again.
	if adopted != nil && adopted.DueAt == ref.DueAt && ledger.PartitionOf(adopted.State) == ref.Partition() {
		r.apply(ctx, ref.TaskID, adopted, nil)
		return
	}
	r.reconcile(ctx, ref.TaskID)
}

// reconcileIfDue is reconcile for a task not found by the walk's query
// (HandleTask): the task read is first held to the query's due_at filter
// of its state, so nothing the walk would not yet find is acted on.
func (r *run) reconcileIfDue(ctx context.Context, id string) {
	t, err := r.h.Ledger.Get(ctx, id)
	if err == nil && t.State.Live() {
		if before, ok := r.h.dueBefore(r.now)[ledger.PartitionOf(t.State)]; ok && t.DueAt >= before {
			r.count(func(s *Summary) { s.Examined++ })
			r.raced()
			return
		}
	}
	r.apply(ctx, id, t, err)
}

// reconcile reads one due task consistently and applies the rule of the
// state it is in now (the index is eventually consistent and other actors
// move tasks all the time).
func (r *run) reconcile(ctx context.Context, id string) {
	t, err := r.h.Ledger.Get(ctx, id)
	r.apply(ctx, id, t, err)
}

// apply is the rule of t's state, t read consistently (err the read's).
func (r *run) apply(ctx context.Context, id string, t *ledger.Task, err error) {
	r.count(func(s *Summary) { s.Examined++ })
	switch {
	case err == nil:
		r.applyRead(ctx, t)
		return
	case errors.Is(err, ledger.ErrNotFound):
		r.raced()
	default:
		r.fail(ctx, "read task", err, "task_id", id)
	}
}

// applyRead is the rule of t's state, t read consistently and examined.
// A watched task not yet in by_state (HandleTask) is indexed first, so
// whatever the rule leaves live is found again.
func (r *run) applyRead(ctx context.Context, t *ledger.Task) {
	if unindexed(t) {
		nt, ok, err := r.adopt(ctx, t)
		if err != nil || !ok {
			r.raced()
			return
		}
		t = nt
	}
	switch t.State {
	case ledger.StateRunning:
		r.expiredLease(ctx, t)
	case ledger.StateUnknown:
		r.unknown(ctx, t)
	case ledger.StateQueued, ledger.StateRetryWait:
		r.relay(ctx, t)
	case ledger.StateAwaitingApproval:
		r.approvalExpired(ctx, t)
	default: // terminal or parked since the index was read
		r.raced()
	}
}

func (r *run) raced() { r.count(func(s *Summary) { s.Raced++ }) }

// expiredLease handles a running task whose lease may have expired.
func (r *run) expiredLease(ctx context.Context, t *ledger.Task) {
	h := r.h
	if t.LeaseUntil >= r.now.Add(-durOr(h.Grace, DefaultGrace)).UnixMilli() {
		r.raced() // renewed, or claimed anew, since the index was read
		return
	}
	budgetLeft, budget := t.BudgetLeft(r.now)
	sideEffects := h.sideEffects(t)
	_, canReadBack := h.looker(t)
	log := r.log.With("task_id", t.TaskID, "version", t.AssignmentVersion, "attempts", t.Attempts, "lease_owner", t.LeaseOwner)
	// With a provider that does not deduplicate, the worker
	// records the call start (ledger.MarkCallStarted) right before the
	// call: without that mark at this version, no call was started under
	// this assignment (the worker died after its claim), so nothing is
	// uncertain.
	unstarted := sideEffects && h.callMarked(t) && t.CallStartedVersion != t.AssignmentVersion
	switch {
	case !budgetLeft && h.retrySafe(t):
		// Nothing to read back for: a retry-safe call's outcome matters
		// only for its cost, which is charged.
		r.park(ctx, t, ledger.ParkOptions{State: ledger.StateRunning, Version: t.AssignmentVersion, LeaseExpired: true},
			h.budgetReview(t, budget))
	case budgetLeft && unstarted:
		u, err := h.Ledger.RequeueUnstarted(ctx, t.TaskID, t.AssignmentVersion)
		if r.lost(ctx, "requeue expired lease without a call", t.TaskID, err) {
			return
		}
		r.count(func(s *Summary) { s.Requeued++ })
		log.InfoContext(ctx, "reconciler: expired lease re-queued; no provider call was started under it")
		r.send(ctx, u)
	case unstarted:
		r.park(ctx, t, ledger.ParkOptions{State: ledger.StateRunning, Version: t.AssignmentVersion, LeaseExpired: true},
			review.BudgetExhaustedNoCall(t, budget))
	case budgetLeft && !sideEffects:
		u, err := h.Ledger.Requeue(ctx, t.TaskID, ledger.StateRunning, t.AssignmentVersion, ledger.InAttempt(t))
		if r.lost(ctx, "requeue expired lease", t.TaskID, err) {
			return
		}
		r.count(func(s *Summary) { s.Requeued++ })
		log.InfoContext(ctx, "reconciler: expired lease re-queued")
		r.send(ctx, u)
	case sideEffects || canReadBack:
		// Re-running could act twice, or the provider can tell us what
		// happened: resolve it by readback (a later run, after Settle), or
		// park from unknown — where a worker whose lease only lapsed can
		// still save its result (CompleteLapsed).
		u, err := h.Ledger.ExpireToUnknown(ctx, t.TaskID, t.AssignmentVersion, ledger.InAttempt(t))
		if r.lost(ctx, "expire lease to unknown", t.TaskID, err) {
			return
		}
		r.count(func(s *Summary) { s.ExpiredToUnknown++ })
		log.InfoContext(ctx, "reconciler: expired lease moved to unknown", "side_effects", sideEffects, "budget_left", budgetLeft)
		if r.pastDeadline(u) {
			// The age budget is over: the promise is a final state within
			// one period, so resolve now rather than a run later.
			r.unknown(ctx, u)
		}
	default:
		// A step without side effects, no readback, and no budget left.
		r.park(ctx, t, ledger.ParkOptions{State: ledger.StateRunning, Version: t.AssignmentVersion, LeaseExpired: true},
			h.budgetReview(t, budget))
	}
}

// unknown resolves an uncertain outcome by provider readback. It waits
// Settle after the task became unknown (a slow worker may still save its
// result; a provider's readback may lag) — unless the task's age budget is
// over, when it resolves at once so the task is final within one period.
func (r *run) unknown(ctx context.Context, t *ledger.Task) {
	h := r.h
	if r.cancelledRetrySafe(ctx, t) { // at once, without the Settle wait: cancel.go
		return
	}
	if !r.pastDeadline(t) && t.DueAt >= r.now.Add(-durOr(h.Settle, DefaultSettle)).UnixMilli() {
		r.raced()
		return
	}
	opts := ledger.ParkOptions{State: ledger.StateUnknown, Version: t.AssignmentVersion}
	at := t.UnknownSince()
	name := ""
	if p := h.step(t); p != nil {
		name = p.Name()
	}
	log := r.log.With("task_id", t.TaskID, "version", t.AssignmentVersion, "provider", name)
	if r.cancelledUnstarted(ctx, t) { // a cancel while running fenced a call that never started: cancel.go
		return
	}
	lk, ok := h.looker(t)
	if !ok && h.retrySafe(t) {
		r.retryUncertain(ctx, t, opts, "no readback")
		return
	}
	if !ok {
		r.count(func(s *Summary) { s.ReadbackNoReadback++ })
		why := "no provider is configured for readback"
		if name != "" {
			why = fmt.Sprintf("provider %q offers no readback (Lookup)", name)
		}
		r.park(ctx, t, opts, h.unknownReview(t, name, at, why))
		return
	}
	// The lookup is also cut where the run's work budget ends: a hung
	// readback must not hold the run past it (the function would be killed
	// before its metrics). A lookup that ends without a result once the
	// budget is over is no answer, whatever it says — a provider may report
	// its cancelled call as "not found" — so the task is left unknown and
	// due for the next run, never re-queued, cancelled or parked on it.
	bctx, cancelBudget := context.WithDeadline(ctx, r.workUntil)
	lctx, cancel := context.WithTimeout(bctx, durOr(h.LookupTimeout, DefaultLookupTimeout))
	res, err := lk.Lookup(lctx, t.OperationID())
	cut := bctx.Err() != nil && (err != nil || len(res.Output) == 0)
	cancel()
	cancelBudget()
	if cut {
		if err == nil {
			err = errors.New("the provider returned an empty result")
		}
		r.count(func(s *Summary) { s.ReadbackErrors++; s.Partial = true })
		log.WarnContext(ctx, "reconciler: readback cut at the end of the run's time budget; retrying next run", "error", err.Error())
		r.deferReadback(ctx, t)
		return
	}
	switch {
	case err == nil && len(res.Output) > 0:
		r.count(func(s *Summary) { s.ReadbackFound++ })
		if res.Provider == "" {
			res.Provider = name
		}
		c := ledger.Completion{Result: string(res.Output), Provider: res.Provider, ProviderRef: res.ProviderRef, ReadbackAt: r.now, ApprovalTTL: t.ApprovalTTL()}
		x := review.Result{Provider: res.Provider, ProviderRef: res.ProviderRef, ResultBytes: len(res.Output), FromReadback: true}
		// The deliveries of a plan without approval and the notifications
		// are created with the completion (package followup).
		fu, err := h.Notify.Completion(t, string(res.Output))
		c.FollowUps = fu
		var nd *followup.NotDeliverableError
		if errors.As(err, &nd) {
			log.WarnContext(ctx, "reconciler: read-back result does not make a valid delivery for the plan; parked", "deliver_index", nd.Index)
			r.park(ctx, t, opts, review.ResultNotSaved(t, x, err))
			return
		}
		if err == nil && h.Payloads != nil && !h.Payloads.Inline(len(res.Output)) {
			// The claim-check: the object first, under the assignment the
			// run read, then the fenced completion saves its reference. A
			// failed put is handled like a failed save (below): tried again
			// next run (it is idempotent), parked past the age budget.
			var v payload.Value
			if v, err = h.Payloads.PlaceResult(ctx, t.TaskID, t.CreatedMs, t.AssignmentVersion, res.Output); err == nil {
				ref := ledger.PayloadRef(*v.Ref)
				c.Result, c.ResultRef = "", &ref
			}
		}
		if err == nil {
			err = ledger.CheckCompletion(t, c)
		}
		if err == nil {
			_, err = h.Ledger.CompleteFromReadback(ctx, t.TaskID, t.AssignmentVersion, c)
		}
		var tl *ledger.ItemTooLargeError
		switch {
		case errors.As(err, &tl):
			// Deterministic: it will never fit. Park with the facts.
			x.ItemBytes, x.Limit = tl.Bytes, tl.Limit
			log.WarnContext(ctx, "reconciler: read-back result too large for the task item", "result_bytes", len(res.Output), "item_bytes", tl.Bytes)
			r.park(ctx, t, opts, review.ResultTooLarge(t, x))
			return
		case err != nil && !isRace(err) && (ledger.IsValidation(err) || r.pastDeadline(t)):
			// The save cannot succeed, or kept failing until the age
			// budget ended: park with the readback facts, not forever.
			log.ErrorContext(ctx, "reconciler: read-back result could not be saved; parked", "error", err.Error())
			r.park(ctx, t, opts, review.ResultNotSaved(t, x, err))
			return
		}
		if r.lost(ctx, "complete from readback", t.TaskID, err) {
			return
		}
		// The run is over: what a crashed attempt still holds on the
		// budgets and the caller's quota is charged (its call generated).
		r.settleAbandoned(ctx, t, 0)
		r.count(func(s *Summary) { s.Completed++ })
		log.InfoContext(ctx, "reconciler: completed from readback", "provider_ref", res.ProviderRef, "result_bytes", len(res.Output))
	case errors.Is(err, contract.ErrNotFound) && r.callMayRun(t):
		// The fenced assignment's worker (its lease expired, or a cancel
		// while running fenced it) may still be in its call: a worker whose
		// renewals fail lets the call run on, up to the call timeout. "Not
		// found" now is no evidence that nothing will be generated — nor,
		// after a cancel, that the provider did not act: wait for it to be
		// credible, or — the age budget over — park saying the call may
		// still reach the provider.
		r.count(func(s *Summary) { s.ReadbackInFlight++ })
		if !r.pastDeadline(t) {
			r.raced()
			return
		}
		if t.CancelledWhileRunning() {
			// What is left to decide is the caller's cancel, not a retry.
			r.park(ctx, t, opts, h.unknownReview(t, name, at, "cancelled while running; "+err.Error()+", but the fenced call may still reach the provider"))
			return
		}
		_, budget := t.BudgetLeft(r.now)
		until, _ := r.callMayRunUntil(t)
		r.park(ctx, t, opts, review.BudgetExhaustedCallMayRun(t, budget, until))
	case errors.Is(err, contract.ErrNotFound):
		r.count(func(s *Summary) { s.ReadbackNotFound++ })
		// An idempotent destination's "not found" proves only that a re-send
		// is harmless, not that the delivery did not happen.
		unproven := t.Kind == deliver.Kind && !errors.Is(err, deliver.ErrAbsent)
		if t.CancelledWhileRunning() && unproven {
			// A re-send would be harmless (an idempotent destination), but
			// nothing proves the cancelled delivery did not happen.
			r.park(ctx, t, opts, h.unknownReview(t, name, at, "cancelled while running; "+err.Error()+", but its absence is not proven"))
			return
		}
		if t.CancelledWhileRunning() { // cancelled while running, and the provider never acted: cancel.go
			r.cancel(ctx, t, "cancelled while running; the provider's readback found no record of the operation, so it did not act")
			return
		}
		if ok, budget := t.BudgetLeft(r.now); !ok {
			if unproven { // the review must not say nothing was delivered
				r.park(ctx, t, opts, h.unknownReview(t, name, at, err.Error()+", but its absence is not proven and the budget to send again is spent"))
				return
			}
			r.park(ctx, t, opts, review.BudgetExhaustedReadBackAbsent(t, budget))
			return
		}
		var u *ledger.Task
		until, lapsed := r.callMayRunUntil(t)
		if (lapsed && r.now.Before(until) || unproven) && !h.retrySafe(t) {
			// A lapsed call may still generate, and the next call collects
			// it (callMayRun); or the delivery may have happened, and a
			// re-send is deduplicated: not waited for, but not settled
			// either (a retry-safe one's outcome is never kept open for a
			// readback).
			u, err = h.Ledger.RequeueCallMayRun(ctx, t)
		} else {
			u, err = h.Ledger.Requeue(ctx, t.TaskID, ledger.StateUnknown, t.AssignmentVersion)
		}
		if r.lost(ctx, "requeue after readback not found", t.TaskID, err) {
			return
		}
		r.count(func(s *Summary) { s.Requeued++ })
		log.InfoContext(ctx, "reconciler: provider has no record of the operation; re-queued", "outcome_open", u.OpenUnknownMs > 0)
		r.send(ctx, u)
	case errors.Is(err, contract.ErrNoReadback) && h.retrySafe(t):
		r.count(func(s *Summary) { s.ReadbackNoReadback++ })
		r.retryUncertain(ctx, t, opts, "no readback")
	case errors.Is(err, contract.ErrNoReadback):
		r.count(func(s *Summary) { s.ReadbackNoReadback++ })
		why := "the provider cannot tell whether the operation happened"
		switch {
		case t.Kind == deliver.Kind:
			why = err.Error() // the destination's guarantees and Decide's reason
		case name != "":
			why = fmt.Sprintf("provider %q cannot tell whether the operation happened", name)
		}
		r.park(ctx, t, opts, h.unknownReview(t, name, at, why))
	default:
		if err == nil {
			err = errors.New("the provider returned an empty result")
		}
		r.count(func(s *Summary) { s.ReadbackErrors++ })
		if r.pastDeadline(t) && h.retrySafe(t) {
			_, budget := t.BudgetLeft(r.now)
			r.park(ctx, t, opts, h.budgetReview(t, budget))
			return
		}
		if r.pastDeadline(t) {
			r.park(ctx, t, opts, h.unknownReview(t, name, at, readbackWhy(t, err)))
			return
		}
		// Transient: the task stays unknown; a later run retries.
		log.WarnContext(ctx, "reconciler: readback failed; retrying next run", "error", err.Error())
		r.deferReadback(ctx, t)
	}
}

// deferReadback moves an unknown task whose readback gave no answer behind
// the other unknown tasks of its stream, due again Settle after this run's
// start (ledger.DeferReadback says why both).
func (r *run) deferReadback(ctx context.Context, t *ledger.Task) {
	if _, err := r.h.Ledger.DeferReadback(ctx, t.TaskID, t.AssignmentVersion, t.UnknownSince(), r.now); err != nil {
		r.lost(ctx, "defer readback", t.TaskID, err)
	}
}

// retryUncertain settles an uncertain attempt of a retry-safe task (why:
// what the readback could not tell): whatever the call did costs only
// money, so it is re-queued for a bounded retry while its budgets last, and
// parked budget_exhausted after — never unknown_outcome.
func (r *run) retryUncertain(ctx context.Context, t *ledger.Task, opts ledger.ParkOptions, why string) {
	if ok, budget := t.BudgetLeft(r.now); !ok {
		r.park(ctx, t, opts, r.h.budgetReview(t, budget))
		return
	}
	u, err := r.h.Ledger.RequeueRetrySafe(ctx, t.TaskID, t.AssignmentVersion)
	if r.lost(ctx, "requeue a retry-safe uncertain attempt", t.TaskID, err) {
		return
	}
	r.count(func(s *Summary) { s.Requeued++ })
	r.log.InfoContext(ctx, "reconciler: uncertain attempt of a retry-safe task re-queued", "task_id", t.TaskID, "version", t.AssignmentVersion, "readback", why)
	r.send(ctx, u)
}

// pastDeadline reports whether t's age budget has ended at the run's start.
func (r *run) pastDeadline(t *ledger.Task) bool {
	return t.DeadlineMs > 0 && r.now.UnixMilli() >= t.DeadlineMs
}

// isRace reports whether err means another actor moved the task first.
func isRace(err error) bool {
	var fe *ledger.FencedError
	var ce *ledger.ConflictError
	return errors.As(err, &fe) || errors.As(err, &ce) || errors.Is(err, ledger.ErrNotFound)
}

// callMayRun reports whether a provider call of t's fenced assignment may
// still be running and must be waited for: the call timeout has not passed
// since the assignment's lease ended (Task.UnknownSince), and either the
// provider does not deduplicate and the worker marked the call's start
// under that assignment, or the provider deduplicates (its calls are never
// marked) and either a cancel fenced the call (what matters then is
// whether it acted at all) or the budget is spent (no second call will
// collect what it generates: "not found" must not say nothing was). With
// budget left, a deduplicating provider's call is not waited for: the task
// is re-queued with its outcome open (ledger.RequeueCallMayRun), for the
// next call to collect what it generates. The fenced
// assignment is either
//   - t's own, whose lease the reconciler expired (the task is unknown
//     with ledger.LeaseExpiredMessage), or
//   - the one a cancel while running fenced (Task.CancelledWhileRunning:
//     cancel_version, the version before t's). The fenced worker learns of
//     the cancel only at a renewal that reaches the table; while its
//     renewals fail its call runs on exactly as after an expired lease, so
//     a "not found" read back before then does not prove that the
//     provider did not act.
//
// The call started while the lease held, so it ends by the lease's end
// plus the call timeout (the longest of the step's and the provider's
// contract.CallTimer; DefaultCallTimeout when neither declares one).
func (r *run) callMayRun(t *ledger.Task) bool {
	until, ok := r.callMayRunUntil(t)
	if !ok || !r.now.Before(until) {
		return false
	}
	if budgetLeft, _ := t.BudgetLeft(r.now); budgetLeft && !r.h.callMarked(t) && !t.CancelledWhileRunning() {
		return false // a second call collects what this one generates (RequeueCallMayRun)
	}
	return true
}

// callMayRunUntil is when a call of t's fenced assignment must have ended
// (its lease's end plus the call timeout), and false when no call of it
// can still be running.
func (r *run) callMayRunUntil(t *ledger.Task) (time.Time, bool) {
	var fenced int64
	earlier := false
	switch {
	case t.CancelledWhileRunning():
		fenced = t.CancelVersion
	case t.ErrorMessage == ledger.LeaseExpiredMessage:
		fenced = t.AssignmentVersion
	case t.OpenUnknownMs > 0 && !r.h.callMarked(t):
		// A later attempt ended with its worker's own word (a retryable
		// failure, or unknown), but an earlier one's lease expired with its
		// outcome open: its unmarked call may still run (the window below,
		// from that lease's end, not the latest attempt's write).
		earlier = true
	default:
		return time.Time{}, false // the worker itself recorded the outcome unknown: its call had ended
	}
	if r.h.callMarked(t) && t.CallStartedVersion != fenced {
		return time.Time{}, false // no call-start mark under the fenced assignment: no call was started
	}
	// The longest bound any side may use: the step's own, the provider's
	// (the worker bounds a delivery's call by it), or the default.
	var timeout time.Duration
	for _, p := range []contract.Provider{r.h.step(t), r.h.Provider} {
		if ct, ok := p.(contract.CallTimer); ok && ct.CallTimeout() > timeout {
			timeout = ct.CallTimeout()
		}
	}
	if timeout == 0 {
		timeout = DefaultCallTimeout
	}
	// An attempt re-queued or taken over with its outcome open (the
	// history records it unknown, ended at its lease's end) may have a
	// call running on as long as the fenced one: its window ends later when
	// its lease did, though the uncertainty dates from the first.
	from := t.UnknownSince()
	if earlier {
		from = time.UnixMilli(t.OpenUnknownMs)
		if t.WorkerEndedOpenOutcome() {
			// Its worker saw its call end when it retried it with the
			// outcome open: only a later attempt whose lease lapsed (below)
			// may have a call running on.
			from = time.Time{}
		}
	}
	for _, a := range t.History() {
		if earlier && a.Attempt == t.Attempts && a.ClaimedMs == t.ClaimedMs {
			continue // the latest attempt's worker recorded its end: its call had ended
		}
		if a.Outcome == ledger.OutcomeUnknown && a.EndedMs > from.UnixMilli() {
			from = time.UnixMilli(a.EndedMs)
		}
	}
	if from.IsZero() {
		return time.Time{}, false
	}
	return from.Add(timeout), true
}

// relay is the outbox relay for queued and retry_wait tasks whose message
// is overdue, and the age/attempt budget check for them.
func (r *run) relay(ctx context.Context, t *ledger.Task) {
	h := r.h
	if ok, budget := t.BudgetLeft(r.now); !ok {
		_, canReadBack := h.looker(t)
		if since, open := t.OpenUncertainty(); open && canReadBack && !h.retrySafe(t) {
			// An earlier attempt's outcome is open (its expired lease was
			// re-queued or taken over): let the readback decide it, as from
			// unknown, rather than park saying the provider may have acted.
			u, err := h.Ledger.AwaitReadback(ctx, t.TaskID, t.AssignmentVersion, since)
			if r.lost(ctx, "await readback", t.TaskID, err) {
				return
			}
			if r.pastDeadline(u) {
				r.unknown(ctx, u)
			}
			return
		}
		r.park(ctx, t, ledger.ParkOptions{State: t.State, Version: t.AssignmentVersion}, h.budgetReview(t, budget))
		return
	}
	dueBefore := r.now
	if t.State == ledger.StateRetryWait {
		dueBefore = dueBefore.Add(-durOr(h.RelaySlack, DefaultRelaySlack))
	}
	if t.DueAt >= dueBefore.UnixMilli() {
		r.raced()
		return
	}
	// Held back at most once per task (its first relay decision), for the
	// longest re-send backoff (ledger.DeferDispatch): a queued task's
	// message, or a retry's (the worker delayed its visibility to
	// not_before), most likely waits in the backlog. Held back run after
	// run, a send that was really lost would wait for the backlog to drain,
	// however long that takes; the next due run re-sends regardless.
	deferred := (t.State == ledger.StateQueued || t.State == ledger.StateRetryWait) && t.Dispatches == 0 && r.queueBacklogged(ctx)
	claim := h.Ledger.ClaimDispatch
	if deferred {
		claim = h.Ledger.DeferDispatch
	}
	ct := t
	if t.State == ledger.StateRetryWait && t.DeadlineMs > 0 {
		// The walk finds a retry_wait task RelaySlack after its due_at:
		// clamp the dispatch deadline that much before the age deadline,
		// so the first run past the age deadline still parks it.
		c := *t
		c.DeadlineMs -= durOr(h.RelaySlack, DefaultRelaySlack).Milliseconds()
		ct = &c
	}
	u, won, err := claim(ctx, ct)
	switch {
	case err != nil:
		r.fail(ctx, "claim dispatch", err, "task_id", t.TaskID)
		return
	case !won && u != nil && u.State.Live() && (u.State != t.State || u.MaxAttempts > 0 && u.Attempts >= u.MaxAttempts):
		// Not in the state the entry was tried as (an active entry is
		// tried as queued, and its task may be running), or out of
		// attempts (the index does not project them): the refusal's item
		// is a consistent read of the task; apply its own rule.
		r.applyRead(ctx, u)
		return
	case !won:
		r.raced() // another reconciler (or a claim) got there first
		return
	case deferred:
		// The deadline backed off (and stays clamped to the age
		// deadline); the message is most likely in the backlog.
		r.count(func(s *Summary) { s.RelayDeferred++ })
		r.log.DebugContext(ctx, "reconciler: re-send held back by the queue backlog", "task_id", t.TaskID, "dispatches", u.Dispatches)
		return
	}
	if r.send(ctx, u) {
		r.count(func(s *Summary) { s.Resent++ })
		r.log.InfoContext(ctx, "reconciler: dispatch re-sent", "task_id", t.TaskID, "state", t.State, "dispatches", u.Dispatches)
	}
}

// queueBacklogged reports whether the task queue holds at least
// BacklogThreshold visible messages, asking SQS once per run. A failed read
// counts as no backlog: re-sending is the safe default.
func (r *run) queueBacklogged(ctx context.Context) bool {
	h := r.h
	if h.Backlog == nil {
		return false
	}
	r.backlogOnce.Do(func() {
		n, err := h.Backlog.Visible(ctx)
		if err != nil {
			r.log.WarnContext(ctx, "reconciler: queue backlog unknown; re-sending as usual", "error", err.Error())
			return
		}
		r.backlog = n
		r.count(func(s *Summary) { s.QueueBacklog = n })
	})
	return r.backlog >= intOr(h.BacklogThreshold, DefaultBacklogThreshold)
}

// send enqueues the task's message. A failed send leaves the task queued
// with its dispatch deadline, so a later run re-sends it.
func (r *run) send(ctx context.Context, t *ledger.Task) bool {
	if err := r.h.Dispatch.Send(ctx, t.TaskID, t.CorrelationID, 0); err != nil {
		r.count(func(s *Summary) { s.SendErrors++ })
		r.fail(ctx, "send task message", err, "task_id", t.TaskID)
		return false
	}
	return true
}

// park moves t to needs_review with its review item (one transaction),
// then settles what its run's attempts still hold (settleAbandoned).
func (r *run) park(ctx context.Context, t *ledger.Task, o ledger.ParkOptions, rv ledger.Review) {
	if o.FollowUps == nil {
		o.FollowUps = r.h.Notify.Parked(t) // the requester's notification
	}
	_, err := r.h.Ledger.Park(ctx, t, o, rv)
	if r.lost(ctx, "park", t.TaskID, err) {
		return
	}
	r.count(func(s *Summary) { s.Parked++ })
	r.log.InfoContext(ctx, "reconciler: parked", "task_id", t.TaskID, "reason", rv.Reason, "state", o.State, "attempts", t.Attempts)
	notCalled := 0
	if (t.State == ledger.StateRunning || t.State == ledger.StateUnknown) && r.h.sideEffects(t) && r.h.callMarked(t) &&
		t.CallStartedVersion != t.AssignmentVersion {
		notCalled = t.Attempts // no call-start mark under the attempt's assignment: no call
	}
	r.settleAbandoned(ctx, t, notCalled)
}

// settleAbandoned settles, on t's budgets and its caller's daily quota,
// what the attempts of t's run still hold once the run is over (parked,
// cancelled or completed from readback: t as it was read, before that
// write): a crashed attempt's reservation, which only the task's next
// attempt settled — and there is none. Left held all day on the quota, it kept every other task of the
// caller that fits only without it waiting, in cycles, until its age
// budget parked it. In full (the provider may have billed it), except
// attempt notCalled's (0: none), whose call provably never started or
// never acted — no call-start mark under its assignment, or a cancel the
// provider did not act on: given back at nothing.
//
// After the write that ended the run, not before: the write's success
// proves the run is over (its worker fenced), so a worker that is alive
// after all never finds its reservation settled under it; a settle first
// would settle one whose write then lost to that worker. A crash or a
// failure in between leaves the reservation held (the safe side: counted,
// never lost), for an operator's action on the parked task to settle
// (opsapi.Apply); it never blocks the park. Idempotent: a repeat, or a
// worker that settled meanwhile, changes nothing. Best effort, logged.
func (r *run) settleAbandoned(ctx context.Context, t *ledger.Task, notCalled int) {
	if r.h.Spend == nil || t.Kind == deliver.Kind || t.Attempts <= 0 {
		return
	}
	n, err := r.h.Spend.SettleAbandoned(ctx, t, notCalled)
	if err != nil {
		r.log.WarnContext(ctx, "reconciler: settling the ended run's reservations failed; they stay counted on its budget and the caller's daily quota",
			"task_id", t.TaskID, "attempts", t.Attempts, "settled", n, "error", err.Error())
		return
	}
	if n > 0 {
		r.log.InfoContext(ctx, "reconciler: settled reservations no attempt will settle", "task_id", t.TaskID, "attempts", t.Attempts,
			"settled", n, "not_called_attempt", notCalled)
	}
}

// lost reports whether err means the write did not happen: a race lost to
// another actor (counted, not an error) or an unexpected failure.
func (r *run) lost(ctx context.Context, op, id string, err error) bool {
	if err == nil {
		return false
	}
	if isRace(err) {
		r.raced()
		r.log.DebugContext(ctx, "reconciler: "+op+": task moved on", "task_id", id, "why", err.Error())
		return true
	}
	r.fail(ctx, op, err, "task_id", id)
	return true
}

// approvalExpired parks a task whose approval deadline (due_at) passed
// without a decision: reason approval_expired. An approval or rejection
// that wins the race makes the park's condition fail (counted as raced).
func (r *run) approvalExpired(ctx context.Context, t *ledger.Task) {
	if t.DueAt > r.now.UnixMilli() {
		r.raced() // withdrawn and re-indexed, or not yet due
		return
	}
	rv := review.ApprovalExpired(t)
	_, err := r.h.Ledger.ExpireApproval(ctx, t, rv, r.h.Notify.Parked(t)...)
	if r.lost(ctx, "park expired approval", t.TaskID, err) {
		return
	}
	r.count(func(s *Summary) { s.Parked++ })
	r.log.InfoContext(ctx, "reconciler: parked", "task_id", t.TaskID, "reason", rv.Reason, "state", ledger.StateAwaitingApproval)
}
