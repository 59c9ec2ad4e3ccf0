package soak

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// spendTask checks the spend-control rules of one planned task (st is nil
// when nothing is stored):
//
//   - spend_over_budget: a budgeted task's chain (a chain_budget root and
//     its regenerates share one) and its own item never spent more than
//     the budget plus one call's reservation (the spend# items, read
//     consistently);
//   - quota_429_wrote, quota_429_without_retry_after: a quota caller's 429
//     carries Retry-After (whole seconds > 0) and wrote nothing: no task,
//     no budget item;
//   - call_after_cancel, cancelled_with_result, cancel_not_by_unknown_rules:
//     after a cancel answered 202 (the running attempt fenced), no provider
//     call of a later attempt started (the fenced attempt's own call may
//     start after the answer: its decision, and in plain mode its
//     call-start mark, preceded the cancel's write; the provider's and the
//     API's timestamps); a cancelled task has no result; any other end is the
//     unknown rules' (completed only by a readback or, without one, by the
//     fenced worker saving the reply it held: error class cancel_too_late;
//     needs_review only as unknown_outcome);
//   - admission_wait_consumed_attempt: the first provider call of a task
//     made to wait for admission carries the attempt number of the claim
//     that waited (the wait gave its attempt back), unless background AWS
//     faults touched the task; each attempt between the two must be one
//     the reconciler re-queued at its lease's expiry (logged with the
//     assignment's attempts): an expired lease costs its attempt (a worker
//     that dies before every call must not loop), and a saturated engine's
//     slow or failed give-back writes leave the lease to expire. Any other
//     re-queue (a later attempt's, one after the first call) excuses
//     nothing.
func (c *checker) spendTask(ctx context.Context, t *task, st *ledger.Task, rv *ledger.Review) {
	s := c.s
	if t.kind == QuotaExceeded {
		c.quotaTask(ctx, t, st)
	}
	if st == nil {
		return
	}
	if st.HasBudget() {
		c.budgetTask(ctx, t, st)
	}
	if at, ok := s.sp.cancelAt[t.id]; ok {
		c.cancelledTask(t, st, rv, at)
	}
	if claim, ok := s.sp.waitClaim[t.id]; ok && s.sp.waited[t.id] > 0 && s.sp.touched[t.id] == 0 {
		for _, e := range s.prov.Events(t.id) {
			if e.Kind != simulated.EventCall {
				continue
			}
			if e.Attempt != claim && !takenBack(s.sp.expired[t.id], claim, e.Attempt) {
				c.add(t.kind, t.id, "admission_wait_consumed_attempt", "the claim that waited for admission had attempt %d, the first provider call came with attempt %d", claim, e.Attempt)
			}
			break
		}
	}
}

// takenBack reports whether every attempt from claim up to (not
// including) first was consumed by an expired lease the reconciler
// re-queued (requeued: the attempts it logged): then the first call's
// attempt first is explained by them alone.
func takenBack(requeued map[int]bool, claim, first int) bool {
	if first <= claim {
		return false
	}
	for a := claim; a < first; a++ {
		if !requeued[a] {
			return false
		}
	}
	return true
}

func (c *checker) quotaTask(ctx context.Context, t *task, st *ledger.Task) {
	rec := c.s.records[t.id]
	rec.mu.Lock()
	final, ok := rec.finals["a"]
	rec.mu.Unlock()
	if !ok || final.status != 429 {
		return
	}
	if ra, err := strconv.Atoi(c.s.sp.retryAfter[t.id]); err != nil || ra <= 0 {
		c.add(t.kind, t.id, "quota_429_without_retry_after", "the 429 came with Retry-After %q", c.s.sp.retryAfter[t.id])
	}
	if st == nil {
		return // nothing stored: no task could reserve (its budget item is named by its creation)
	}
	c.add(t.kind, t.id, "quota_429_wrote", "the caller got 429, yet the task is stored (%s)", st.State)
	if own, err := c.s.sp.budgets.Get(ctx, spend.TaskKeyOf(st)); err == nil && (own.Spent.Tokens() > 0 || own.ReservedTokens > 0) {
		c.add(t.kind, t.id, "quota_429_wrote", "the caller got 429, yet the task's budget item records %d tokens", own.Spent.Tokens()+own.ReservedTokens)
	}
}

func (c *checker) budgetTask(ctx context.Context, t *task, st *ledger.Task) {
	rsv := callMax(t.input)
	for _, k := range []string{spend.ChainKeyOf(st), spend.TaskKeyOf(st)} {
		bs, err := c.s.sp.budgets.Get(ctx, k)
		if err != nil {
			c.add(t.kind, t.id, "spend_item_unreadable", "%s: %v", k, err)
			continue
		}
		if st.BudgetMaxTokens > 0 && bs.Spent.Tokens() > st.BudgetMaxTokens+rsv {
			c.add(t.kind, t.id, "spend_over_budget", "%s spent %d tokens, budget %d + one reservation %d", k, bs.Spent.Tokens(), st.BudgetMaxTokens, rsv)
		}
		if k == spend.ChainKeyOf(st) && t.parent == nil {
			sp := c.spendRow(t.kind)
			sp.chains++
			sp.maxOver = max(sp.maxOver, bs.Spent.Tokens()-st.BudgetMaxTokens)
		}
	}
	if st.State == ledger.StateNeedsReview && st.ReviewReason == ledger.ReviewBudgetExhausted {
		c.spendRow(t.kind).exhausted++
	}
}

func (c *checker) cancelledTask(t *task, st *ledger.Task, rv *ledger.Review, cancelAt time.Time) {
	// The fenced assignment's own call may still start after the answer
	// (its decision, and in plain mode its call-start mark, came first);
	// a call of any later assignment may not.
	fenced, known := c.s.sp.cancelAtt[t.id]
	for _, e := range c.s.prov.Events(t.id) {
		if e.Kind == simulated.EventCall && e.Start.After(cancelAt) && known && fenced >= 0 && e.Attempt > fenced {
			c.add(t.kind, t.id, "call_after_cancel", "a provider call of attempt %d started %s after the cancel fenced attempt %d",
				e.Attempt, e.Start.Sub(cancelAt), fenced)
		}
	}
	switch st.State {
	case ledger.StateCancelled:
		if st.HasResult() {
			c.add(t.kind, t.id, "cancelled_with_result", "cancelled while running, yet a result is saved")
		}
	case ledger.StateCompleted:
		// Without readback, only the fenced worker holding the provider's
		// reply may save it (ledger.CompleteCancelled, cancel_too_late).
		if c.s.cfg.Mode == ModePlain && st.ErrorClass != ledger.ErrorCancelTooLate {
			c.add(t.kind, t.id, "cancel_not_by_unknown_rules", "cancelled while running, completed without a readback (provider %s) and not from the reply the fenced worker held", c.s.cfg.Mode)
		}
	case ledger.StateNeedsReview:
		if st.ReviewReason != ledger.ReviewUnknownOutcome && (rv == nil || rv.Reason != ledger.ReviewUnknownOutcome) {
			c.add(t.kind, t.id, "cancel_not_by_unknown_rules", "cancelled while running, parked %q instead of unknown_outcome", st.ReviewReason)
		}
	default:
		c.add(t.kind, t.id, "cancel_not_by_unknown_rules", "cancelled while running, ended %s", st.State)
	}
	c.spendRow(t.kind).ends[st.State]++
}

// spendRowStats are the figures of a spend-control kind's row note.
type spendRowStats struct {
	chains, exhausted int
	maxOver           int64
	ends              map[ledger.State]int
}

func (c *checker) spendRow(k Kind) *spendRowStats {
	if c.spendRows == nil {
		c.spendRows = map[Kind]*spendRowStats{}
	}
	r := c.spendRows[k]
	if r == nil {
		r = &spendRowStats{maxOver: -1 << 62, ends: map[ledger.State]int{}}
		c.spendRows[k] = r
	}
	return r
}

// windowCalls counts the provider calls that started in each admission
// window (every operation the provider saw), by window start (epoch
// seconds).
func (s *soak) windowCalls() map[int64]int {
	w := int64(AdmissionWindow.Seconds())
	out := map[int64]int{}
	for op := range s.prov.Snapshot() {
		for _, e := range s.prov.Events(op) {
			if e.Kind == simulated.EventCall {
				sec := e.Start.Unix()
				out[sec-sec%w]++
			}
		}
	}
	return out
}

// spendRunWide checks admission_window_over_limit (no admission window
// saw more provider calls start than its request limit, counted at the
// provider) and writes the rows' notes.
func (c *checker) spendRunWide(rep *Report) {
	s := c.s
	wins := s.windowCalls()
	starts := make([]int64, 0, len(wins))
	busiest := 0
	for w, n := range wins {
		starts = append(starts, w)
		busiest = max(busiest, n)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for _, w := range starts {
		if n := wins[w]; n > AdmissionRequests {
			c.add(AdmissionWait, "window "+strconv.FormatInt(w, 10), "admission_window_over_limit", "%d provider calls started in the window, limit %d", n, AdmissionRequests)
		}
	}
	waits, waiters := 0, 0
	for _, n := range s.sp.waited {
		waits += n
		waiters++
	}
	c.row(AdmissionWait).Note = fmt.Sprintf("%d waits for admission in all (%d tasks); busiest window %d calls of limit %d per %s", waits, waiters, busiest, AdmissionRequests, AdmissionWindow)
	accepted := 0
	for _, t := range s.tasks {
		f, ok := s.records[t.id].finals["a"]
		switch {
		case !ok:
		case t.kind == QuotaExceeded && f.status/100 == 2:
			accepted++
		case t.kind == QuotaExceeded && f.status == http.StatusTooManyRequests:
			rep.Refused++
		case t.parent != nil && f.status/100 == 2:
			rep.Regenerates++
		}
	}
	c.row(QuotaExceeded).Note = fmt.Sprintf("injected = 429s; %d accepted before the caller's settled calls left no room for another under its quota of %d tokens", accepted, QuotaTokens)
	if r := c.spendRows[BudgetTight]; r != nil {
		c.row(BudgetTight).Note = fmt.Sprintf("%d budgets, %d parked budget_exhausted, largest spend over budget %d tokens (bound: one reservation)", r.chains, r.exhausted, r.maxOver)
	}
	if r := c.spendRows[ChainBudget]; r != nil {
		c.row(ChainBudget).Note = fmt.Sprintf("%d chains (a root and %d regenerates at once), %d tasks parked budget_exhausted, largest chain spend over budget %d tokens (bound: one reservation)", r.chains, regeneratesPerChain, r.exhausted, r.maxOver)
	}
	if r := c.spendRows[CancelRunning]; r != nil {
		c.row(CancelRunning).Note = fmt.Sprintf("ends after a cancel in flight: %d cancelled, %d completed (readback), %d needs_review", r.ends[ledger.StateCancelled], r.ends[ledger.StateCompleted], r.ends[ledger.StateNeedsReview])
	}
}
