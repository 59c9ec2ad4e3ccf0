package soak

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The invariants of the unforgiving path.

// reasonResultTooLarge is the review reason of a result above the item
// limit.
const reasonResultTooLarge = "result_too_large"

// providersResult reports whether st's saved result and provider_ref are
// one of the provider's generations for the task.
func (s *soak) providersResult(id string, st *ledger.Task) bool {
	saved := s.storedResult(st)
	for _, r := range s.prov.Results(id) {
		if string(r.Output) == saved && r.ProviderRef == st.ProviderRef {
			return true
		}
	}
	return false
}

// saysMayHaveActed reports whether a review tells the operator that the
// provider may have acted.
func saysMayHaveActed(r *ledger.Review) bool {
	text := strings.ToLower(r.Summary + "\n" + strings.Join(r.Uncertain, "\n"))
	return strings.Contains(text, "may have")
}

// unforgiving checks one task against the invariants of the unforgiving
// path. fresh: a ttl_expired task whose key got a fresh task.
func (c *checker) unforgiving(t *task, st *ledger.Task, r *ledger.Review, fresh bool) {
	s := c.s
	switch why, kind := falseUncertainty(s.prov.Starts(t.id), st, r); kind {
	case uncertainFalse:
		c.add(t.kind, t.id, "false_uncertainty", "%s", why)
	case uncertainCalled:
		c.uncertain.Called++
	case uncertainGenuine:
		c.uncertain.Genuine++
	}
	// A provider without idempotency is never called again after an
	// uncertain outcome, unless a readback proved the operation absent.
	if s.cfg.Mode != ModeIdempotent {
		var since time.Time
		if fresh {
			since = time.UnixMilli(st.CreatedMs)
		}
		if n, why := recallAfterUncertain(s.prov.Events(t.id), since); n > 0 {
			c.add(t.kind, t.id, "recall_after_uncertain", "%d provider call(s) after %s, without a readback that found nothing", n, why)
		}
	}
	// Never start a call that cannot finish in the invocation.
	if n := s.cut[t.id]; n > 0 {
		c.add(t.kind, t.id, "call_cut_by_deadline", "%d provider call(s) started with too little of the invocation left and cut short by its deadline", n)
	}
	// Results above the item limit: saved through the S3 claim-check
	// (completed with a result reference) or, without a payload bucket,
	// parked result_too_large; never saved inline, never called uncertain;
	// result_too_large only for those (and never with a bucket).
	oversized := s.oversized(t.id)
	reason := st.ReviewReason
	if r != nil {
		reason = r.Reason
	}
	switch {
	case len(st.Result)+len(st.Input) > ItemLimit:
		c.add(t.kind, t.id, "result_over_item_limit", "a saved result of %d bytes: the item exceeds DynamoDB's %d-byte limit", len(st.Result), ItemLimit)
	case oversized && fresh:
	case oversized && s.payloads != nil && (st.State != ledger.StateCompleted || st.ResultRef == nil):
		c.add(t.kind, t.id, "oversized_result_not_offloaded", "the provider returned a result above the item limit; the task ended %s (%s), want completed with a result reference", st.State, reason)
	case oversized && s.payloads != nil:
	case oversized && (st.State != ledger.StateNeedsReview || reason != reasonResultTooLarge):
		c.add(t.kind, t.id, "oversized_result_not_parked", "the provider returned a result above the item limit; the task ended %s (%s), want needs_review (%s)", st.State, reason, reasonResultTooLarge)
	case !oversized && reason == reasonResultTooLarge:
		c.add(t.kind, t.id, "result_too_large_without_oversize", "parked result_too_large, but no result above the item limit was returned")
	}
	// A write whose reply was lost is still ours: reported as what it did.
	if n := s.retryDropped[t.id]; n > 0 {
		c.add(t.kind, t.id, "scheduled_retry_acknowledged", "the worker scheduled a retry (its reply lost, the SDK's retry refused) and acknowledged the record: no message left for the retry")
	}
	if st.State == ledger.StateCompleted && st.ReadbackAt == "" {
		for _, v := range s.discarded[t.id] {
			if v == st.AssignmentVersion {
				c.add(t.kind, t.id, "saved_result_reported_discarded", "the worker of version %d logged its result as discarded, yet it is the saved one", v)
				break
			}
		}
	}
	if t.kind == TTLExpired {
		c.expiredKey(t, st)
	}
}

// falseUncertainty explains why a task with this many provider call
// starts claims an uncertainty it cannot have, or returns "": "the provider
// may have acted" needs a call that reached it.
func falseUncertainty(starts int, st *ledger.Task, r *ledger.Review) (string, uncertainty) {
	var says string
	switch {
	case st.ReviewReason == ledger.ReviewUnknownOutcome || (r != nil && r.Reason == ledger.ReviewUnknownOutcome):
		says = "parked unknown_outcome"
	case r != nil && saysMayHaveActed(r):
		says = "review (" + r.Reason + ") says the provider may have acted"
	default:
		return "", uncertainNone
	}
	switch {
	case starts > 0:
		return "", uncertainCalled
	case st.CallStartedVersion > 0 && st.CallStartedVersion == st.AssignmentVersion:
		// The parked attempt wrote its call-start mark, which comes right
		// before the call: a worker that stopped in between never called,
		// and nothing can tell. The review must say exactly that.
		if r != nil && !strings.Contains(reviewText(r), "cannot be known") {
			return says + " after a call-start mark with no call, without saying whether the call was sent cannot be known", uncertainFalse
		}
		return "", uncertainGenuine
	}
	return says + ", but no provider call was ever started for it", uncertainFalse
}

// reviewText is every line of r.
func reviewText(r *ledger.Review) string {
	return strings.Join(append(append(append([]string{r.Summary}, r.Known...), r.Uncertain...), r.SafeActions...), "\n")
}

// uncertainty is what a park saying the provider may have acted rests on.
type uncertainty int

const (
	uncertainNone    uncertainty = iota // the park claims nothing uncertain
	uncertainCalled                     // a call did start
	uncertainGenuine                    // the mark was written, no call started: unknowable
	uncertainFalse                      // nothing suggests a call
)

// oversized reports whether the provider returned a result above the item
// limit for the task.
func (s *soak) oversized(id string) bool {
	for _, res := range s.prov.Results(id) {
		if len(res.Output) > ItemLimit {
			return true
		}
	}
	return false
}

// recallAfterUncertain walks a task's provider events from since and counts
// the calls that started while an earlier call's outcome was uncertain
// (performed, reply lost, interrupted, or still in flight) and no lookup
// had answered "not found" since.
func recallAfterUncertain(evs []simulated.Event, since time.Time) (n int, why string) {
	uncertain, last := false, simulated.OutcomeInFlight
	for _, e := range evs {
		if e.Start.Before(since) {
			continue
		}
		switch e.Kind {
		case simulated.EventLookup:
			if e.Outcome == simulated.OutcomeNotFound {
				uncertain = false
			}
		case simulated.EventCall:
			if uncertain {
				n++
				if why == "" {
					why = "a call that ended " + outcomeName(last)
				}
			}
			if e.Outcome.Uncertain() {
				uncertain, last = true, e.Outcome
			}
		}
	}
	return n, why
}

func outcomeName(o simulated.Outcome) string {
	if o == simulated.OutcomeInFlight {
		return "in flight"
	}
	return string(o)
}

// expiredKey checks a ttl_expired task after its key was submitted again
// past its expires_at: a fresh task (202), not a replay of the expired one.
// st is nil when the item was deleted by TTL after the resubmit.
func (c *checker) expiredKey(t *task, st *ledger.Task) {
	old := c.s.expired[t.id]
	if old == nil {
		return // never completed, so never expired (noted)
	}
	rec := c.s.records[t.id]
	rec.mu.Lock()
	cl, ok := rec.finals[variantTTL]
	rec.mu.Unlock()
	switch {
	case !ok:
		c.add(t.kind, t.id, "expired_key_not_resubmitted", "the resubmit after expiry left no answer")
	case cl.status != http.StatusAccepted || (st != nil && st.CreatedMs <= old.CreatedMs):
		c.add(t.kind, t.id, "expired_key_replayed", "resubmitted past expires_at: answered %d (replayed %t), want 202 and a fresh task", cl.status, cl.replayed)
	}
}

// perTask fills the per-task AWS call figures and checks the SendMessage
// and GetItem budgets.
func (c *checker) perTask(rep *Report) {
	rep.PerTask = map[string]float64{}
	if rep.Accepted == 0 {
		return
	}
	for k, n := range rep.Calls {
		rep.PerTask[k] = float64(n) / float64(rep.Accepted)
	}
	if rep.Accepted < CallBudgetMinTasks {
		return
	}
	if v := rep.PerTask["SQS.SendMessage"]; v > MaxSendPerTask {
		c.add(QueueBacklog, "-", "send_messages_per_task", "SQS.SendMessage %.2f per task, budget %.1f", v, MaxSendPerTask)
	}
	if v := rep.PerTask["DynamoDB.GetItem"]; v > MaxGetPerTask {
		c.add(QueueBacklog, "-", "get_items_per_task", "DynamoDB.GetItem %.2f per task, budget %.1f", v, MaxGetPerTask)
	}
}

// perTaskLine formats the per-task figures, sorted by operation.
func perTaskLine(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.3f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
