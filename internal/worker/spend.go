package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Spend is the worker's spend accounting (DESIGN §13, package spend). A
// Handler without one makes no spend call at all; a task without a budget
// makes no budget call, and when Quotas is set its call is reserved on and
// settled to the caller's daily quota alone.
type Spend struct {
	// Prices is the price table (required).
	Prices *spend.Config
	// Budgets reserves and settles budgets (required).
	Budgets *spend.Accountant
	// Quotas, when set, is the per-caller daily quota every generate call
	// is reserved on (doc.go, "Spend").
	Quotas *spend.Quotas
}

// reservation is one attempt's reservation on its chain's and its own
// budget item, and on its caller's daily quota.
type reservation struct {
	r      spend.Reservation
	max    spend.Usage // the reservation as a usage (input + max output tokens, priced)
	model  string
	priced bool             // the price table prices model; else reserved on a token quota by its tokens alone
	budget bool             // reserved on the chain's and the task's budget items
	quota  *spend.QuotaHold // reserved on the caller's daily quota, on this hold's day
}

// model is the model id the provider calls ("" when it does not say).
func (h *Handler) model() string {
	if m, isModeler := h.Provider.(contract.Modeler); isModeler {
		return m.Model()
	}
	return ""
}

// callMaximum is the most a call of t may use, the bound both the budget
// and admission reserve. input is as the provider gets it (not t.Input,
// empty when offloaded).
func callMaximum(t *ledger.Task, input string) (in, out int64) {
	return callMaximumOf(input, documentSizes(t.Documents))
}

func callMaximumOf(input string, docs []contract.DocumentSize) (in, out int64) {
	g, err := contract.ParseGenerateInput([]byte(input))
	if err != nil { // never for an accepted task; reserve by the stored size
		in, _ = contract.CallMaximumWith(contract.GenerateInput{}, docs)
		return in + int64(len(input)), contract.MaxTokensLimit
	}
	return contract.CallMaximumWith(g, docs)
}

func documentSizes(docs []ledger.DocumentRef) []contract.DocumentSize {
	out := make([]contract.DocumentSize, len(docs))
	for i, d := range docs {
		out[i] = contract.DocumentSize{Format: d.Format, Size: d.Ref.Size}
	}
	return out
}

// reserve reserves the call's maximum before the call (doc.go, "Spend").
// ok=false means the provider must not be called and r is the record's
// result. A missing price parks the task provider_config, unless a token
// quota alone reserves the call.
func (h *Handler) reserve(ctx context.Context, rec events.SQSMessage, t *ledger.Task, input string, log *slog.Logger) (rs *reservation, r result, ok bool) {
	s := h.Spend
	quota := s != nil && s.Quotas != nil && t.Kind != deliver.Kind
	if !t.HasBudget() && !quota {
		return nil, result{}, true
	}
	parkConfig := func(reason, msg string) result {
		f := review.Failure{Class: retrypolicy.PermanentConfig.String(), Reason: reason, Message: clip(msg, MaxErrorMessage)}
		return h.parkUncalled(ctx, t, review.ProviderConfig(t, h.Provider.Name(), f), log)
	}
	if s == nil {
		// Never run a budgeted task unbudgeted.
		log.ErrorContext(ctx, "the task has a spend budget and this worker has no price table (SPEND_CONFIG); provider not called")
		return nil, parkConfig("no_price_table", "the task has a spend budget, and the worker has no price table (SPEND_CONFIG) to price its calls"), false
	}
	model := h.model()
	in, out := callMaximum(t, input)
	maxUse, err := s.Prices.Usage(model, in, out)
	priced := err == nil
	if !priced {
		if t.HasBudget() || quota && s.Quotas.Quota().Unit == spend.UnitUSD {
			msg := err.Error()
			if !t.HasBudget() {
				msg += "; the caller's daily quota counts USD, so the call cannot be charged to it"
			}
			log.ErrorContext(ctx, "the call cannot be priced; provider not called", "model", model, "error", msg)
			return nil, parkConfig("unpriced_model", msg), false
		}
		maxUse = spend.Usage{InputTokens: in, OutputTokens: out}
	}
	rs = &reservation{
		r:      spend.Reservation{ID: spend.AttemptReservationID(t, t.Attempts), Tokens: maxUse.Tokens(), Cost: maxUse.Cost},
		max:    maxUse,
		model:  model,
		priced: priced,
	}
	log = log.With("reserve_tokens", rs.r.Tokens, "reserve_usd", rs.r.Cost.String())
	h.settleEarlierAttempts(ctx, t, rs, quota, log)
	if t.HasBudget() {
		if r, ok := h.reserveBudget(ctx, rec, t, rs, log); !ok {
			return nil, r, false
		}
	}
	if quota {
		if r, ok := h.reserveQuota(ctx, rec, t, rs, log); !ok {
			return nil, r, false
		}
	}
	return rs, result{}, true
}

// reserveBudget is reserve's part on the chain's (which enforces the budget)
// and the task's budget items.
func (h *Handler) reserveBudget(ctx context.Context, rec events.SQSMessage, t *ledger.Task, rs *reservation, log *slog.Logger) (result, bool) {
	s := h.Spend
	budget := spend.Budget{MaxTokens: t.BudgetMaxTokens, MaxCost: spend.Micros(t.BudgetMaxMicros)}
	_, err := s.Budgets.Reserve(ctx, spend.ChainKeyOf(t), budget, rs.r)
	var be *spend.BudgetExhaustedError
	if errors.As(err, &be) {
		rt, rc := be.State.Remaining(be.Budget)
		log.WarnContext(ctx, "spend budget exhausted; provider not called", "spent_tokens", be.State.Spent.Tokens(),
			"spent_usd", be.State.Spent.Cost.String(), "remaining_tokens", rt, "remaining_usd", rc.String())
		h.countMetric(t, "BudgetExhausted")
		return h.parkUncalled(ctx, t, review.SpendExhausted(t, be), log), false
	}
	if err == nil {
		// The task's own item only records its usage: no limit.
		_, err = s.Budgets.Reserve(ctx, spend.TaskKeyOf(t), spend.Budget{}, rs.r)
	}
	if err != nil {
		// No call follows: give back what was reserved, and what a failed
		// write may have reserved all the same (a lost reply, a refused repeat).
		h.settleBudgets(ctx, t, rs.r, spend.Usage{}, true, "giving back a budget reservation whose write failed", log)
		return h.giveBackUncalled(ctx, rec, t, 0, "budget reservation failed", log, "error", err.Error()), false
	}
	rs.budget = true
	return result{}, true
}

// reserveQuota is reserve's part on the caller's daily quota. Refused or
// failed, no call is made: the budget reservations are given back first,
// and a failed write's, which may have landed all the same, before the task.
func (h *Handler) reserveQuota(ctx context.Context, rec events.SQSMessage, t *ledger.Task, rs *reservation, log *slog.Logger) (result, bool) {
	hold, err := h.Spend.Quotas.Reserve(ctx, t.Scope, rs.r)
	if err == nil {
		rs.quota = &hold
		return result{}, true
	}
	if rs.budget {
		h.settleBudgets(ctx, t, rs.r, spend.Usage{}, false, "giving back a budget reservation", log)
	}
	var qe *spend.QuotaExceededError
	if errors.As(err, &qe) {
		log = log.With("quota_day", qe.Day, "quota_unit", string(qe.Unit), "quota_used", qe.Used, "quota_reserved", qe.Reserved,
			"quota_limit", qe.Limit, "quota_wanted", qe.Wanted)
		if qe.HeldByCallsInFlight() {
			h.countMetric(t, "QuotaWait")
			return h.waitQuota(ctx, rec, t, log), false
		}
		log.WarnContext(ctx, "the caller's daily quota has no room for the call; provider not called", "never_fits", qe.NeverFits())
		h.countMetric(t, "QuotaExceeded")
		return h.parkUncalled(ctx, t, review.QuotaExceeded(t, qe), log), false
	}
	// Without the give-back it would hold the caller's quota as a call in
	// flight until the task's next attempt, or all day were it cancelled.
	if _, serr := h.Spend.Quotas.SettleIfReserved(ctx, t.Scope, hold, rs.r, spend.Usage{}); serr != nil {
		log.WarnContext(ctx, "giving back a daily quota reservation whose write failed did not succeed; it stays counted", "error", serr.Error())
	}
	return h.giveBackUncalled(ctx, rec, t, 0, "daily quota reservation failed", log, "error", err.Error()), false
}

// QuotaWait is a task's first wait (plus jitter, quotaWaitFor) when only
// calls in flight keep it out of its caller's daily quota: they free it in
// a model call's seconds, so the wait is seconds rather than a lease.
const QuotaWait = 5 * time.Second

// QuotaWaitMax is the longest a quota wait's base grows to (quotaWaitFor):
// a wait lasts at most twice it.
const QuotaWaitMax = 30 * time.Second

// quotaWaitFor is the next wait of a task that waited so far (since its age
// budget started: no write counts waits): half of that within [QuotaWait,
// QuotaWaitMax], plus jitter of up to as much again, which spreads one
// caller's tasks over the item they share. A hold that does not clear (a
// crashed attempt's) so costs at most 7 claims in the first minute (0, 5,
// 10, 15, 22.5, 33.75, 50.6 s) and 120 in the hour after, where fixed 5–10 s
// waits cost 720.
func quotaWaitFor(waited time.Duration, jitter func(time.Duration) time.Duration) time.Duration {
	base := min(max(waited/2, QuotaWait), QuotaWaitMax)
	return base + jitter(base)
}

// waitQuota puts the task back, its attempt given back, to wait for the
// calls in flight that hold its caller's quota.
func (h *Handler) waitQuota(ctx context.Context, rec events.SQSMessage, t *ledger.Task, log *slog.Logger) result {
	now := h.Ledger.Now()
	start := t.BudgetStartMs
	if start <= 0 {
		start = t.CreatedMs
	}
	kept := max(now.Sub(time.UnixMilli(start)), 0)
	return h.waitUntil(ctx, rec, t, now.Add(quotaWaitFor(kept, rand.N[time.Duration])), "daily quota",
		"calls in flight hold the caller's daily quota; waiting for them without consuming an attempt", log, "kept_ms", kept.Milliseconds())
}

// settleBudgets settles r at used on the chain's and the task's budget
// items (ifReserved: only where still reserved). A failure is logged as
// what failed, and leaves the reservation counted: the safe side.
func (h *Handler) settleBudgets(ctx context.Context, t *ledger.Task, r spend.Reservation, used spend.Usage, ifReserved bool, what string, log *slog.Logger) {
	for _, key := range []string{spend.ChainKeyOf(t), spend.TaskKeyOf(t)} {
		var err error
		if ifReserved {
			_, err = h.Spend.Budgets.SettleIfReserved(ctx, key, r, used)
		} else {
			_, err = h.Spend.Budgets.Settle(ctx, key, r, used)
		}
		if err != nil {
			log.WarnContext(ctx, what+" did not succeed; the reservation stays counted", "budget_key", key, "error", err.Error())
		}
	}
}

// settleEarlierAttempts settles in full (they may have been billed) the
// holds of the run's earlier attempts before this one reserves: a crashed
// attempt's hold would otherwise count as a call in flight (on the quota,
// all day), since nobody but a worker settles a live run. Attempt 2 settles
// attempt 1 with a conditional write per item, no read; from attempt 3,
// SettleAbandoned reads the items. A failure leaves the holds counted.
func (h *Handler) settleEarlierAttempts(ctx context.Context, t *ledger.Task, rs *reservation, quota bool, log *slog.Logger) {
	switch {
	case t.Attempts <= 1:
	case t.Attempts == 2:
		prev := rs.r
		prev.ID = spend.AttemptReservationID(t, 1)
		if t.HasBudget() {
			h.settleBudgets(ctx, t, prev, rs.max, true, "settling the previous attempt's reservation", log)
		}
		if quota {
			// One reserved on an earlier day holds no room today.
			q := h.Spend.Quotas
			if _, err := q.SettleIfReserved(ctx, t.Scope, q.Today(), prev, rs.max); err != nil {
				log.WarnContext(ctx, "settling the previous attempt's daily quota reservation failed; it stays counted", "error", err.Error())
			}
		}
	case h.Spend.Budgets != nil:
		if _, err := h.Spend.Budgets.SettleAbandoned(ctx, t, t.Attempts); err != nil {
			log.WarnContext(ctx, "settling the earlier attempts' reservations failed; they stay counted", "error", err.Error())
		}
	}
}

// settle replaces the reservation by what the call used (usedBy), where it
// was reserved; a task that reserved nothing is accounted (account). A
// failure leaves the reservation counted.
func (h *Handler) settle(ctx context.Context, t *ledger.Task, input string, rs *reservation, a attempt, log *slog.Logger) {
	h.checkBound(t, input, a, log)
	if rs == nil {
		if rs = h.account(t, input, a); rs == nil {
			return
		}
	}
	used := h.usedBy(rs, a, log)
	if rs.budget {
		h.settleBudgets(ctx, t, rs.r, used, false, "budget settle", log)
	}
	if rs.quota != nil {
		if err := h.Spend.Quotas.Settle(ctx, t.Scope, *rs.quota, rs.r, used); err != nil {
			log.WarnContext(ctx, "daily quota settle failed; the reservation stays counted in the caller's quota", "error", err.Error())
		}
	}
	// Unbudgeted, a call is recorded only when it used something.
	if rs.budget || used != (spend.Usage{}) {
		log.InfoContext(ctx, "spend recorded", "input_tokens", used.InputTokens, "output_tokens", used.OutputTokens, "cost_usd", used.Cost.String())
		h.usageMetric(t, used, rs.priced)
	}
}

// account is what a call that reserved nothing is settled against (on no
// item), so every task's spend is visible: its priced maximum; nil without a
// price (the reported tokens are counted) or for a delivery.
func (h *Handler) account(t *ledger.Task, input string, a attempt) *reservation {
	if t.Kind == deliver.Kind || notSent(a.err) {
		return nil
	}
	if h.Spend != nil {
		model := h.model()
		in, out := callMaximum(t, input)
		if maxUse, err := h.Spend.Prices.Usage(model, in, out); err == nil {
			return &reservation{max: maxUse, model: model, priced: true}
		}
	}
	if a.err == nil && a.res.Usage != nil {
		h.usageMetric(t, reported(a), false)
	}
	return nil
}

// reported is a successful call's reported usage, a negative count as none.
func reported(a attempt) spend.Usage {
	return spend.Usage{InputTokens: int64(max(a.res.Usage.InputTokens, 0)), OutputTokens: int64(max(a.res.Usage.OutputTokens, 0))}
}

// notSent reports whether a failed call provably never left the process
// (retrypolicy.ErrRequestNotSent, errNoCall): charged nothing, its attempt
// given back (failure).
func notSent(err error) bool {
	return err != nil && errors.Is(err, retrypolicy.ErrRequestNotSent)
}

// usedBy is what an attempt is charged (doc.go, "Spend"): the reported
// usage, priced; else the full reservation, or nothing for a refusal in so
// many words or a call never sent.
func (h *Handler) usedBy(rs *reservation, a attempt, log *slog.Logger) spend.Usage {
	if notSent(a.err) {
		return spend.Usage{}
	}
	if a.err == nil {
		if a.res.Usage == nil {
			return rs.max
		}
		u := reported(a)
		if !rs.priced {
			return u
		}
		u, err := h.Spend.Prices.Usage(rs.model, u.InputTokens, u.OutputTokens)
		if err != nil {
			log.Warn("pricing the reported usage failed; charging the reservation", "error", err.Error())
			return rs.max
		}
		return u
	}
	if a.fenced == nil && a.cutBy == "" && retrypolicy.Refused(a.err) {
		return spend.Usage{}
	}
	// A gateway's 5xx does not say the model did not generate (and bill):
	// retries of 502s would otherwise spend while the budget showed zero.
	return rs.max
}

// countMetric writes one EMF record counting name (BudgetExhausted,
// QuotaWait, QuotaExceeded, MetricBoundExceeded) for t.
func (h *Handler) countMetric(t *ledger.Task, name string) {
	_ = h.Metrics.Record("Service", "worker").Property("task_id", t.TaskID).Add(name, 1, metrics.Count).Flush()
}

// usageMetric writes the tokens (and, when priced, the cost) of a call.
func (h *Handler) usageMetric(t *ledger.Task, u spend.Usage, priced bool) {
	rec := h.Metrics.Record("Service", "worker").Property("task_id", t.TaskID).
		Add("InputTokens", float64(u.InputTokens), metrics.Count).
		Add("OutputTokens", float64(u.OutputTokens), metrics.Count)
	if priced {
		rec.Add("CostUSD", float64(u.Cost)/float64(spend.MicrosPerUSD), metrics.None)
	}
	_ = rec.Flush()
}

// MetricBoundExceeded counts provider calls that reported more tokens than
// their bound (callMaximum), which budgets and admission reserved: a
// per-document or prompt bound failed for this model.
const MetricBoundExceeded = "BoundExceeded"

// checkBound logs and counts a successful call above its bound.
func (h *Handler) checkBound(t *ledger.Task, input string, a attempt, log *slog.Logger) {
	if t.Kind == deliver.Kind || a.err != nil || a.res.Usage == nil {
		return
	}
	in, out := callMaximum(t, input)
	usedIn, usedOut := int64(a.res.Usage.InputTokens), int64(a.res.Usage.OutputTokens)
	if usedIn <= in && usedOut <= out {
		return
	}
	log.Error("the provider reported more tokens than the call's bound; budgets and admission under-reserved this call",
		"bound_input_tokens", in, "bound_output_tokens", out, "input_tokens", usedIn, "output_tokens", usedOut,
		"documents", len(t.Documents))
	h.countMetric(t, MetricBoundExceeded)
}

// errNoCall settles a reservation whose call was never made: nothing is charged.
var errNoCall = fmt.Errorf("worker: no provider call was made: %w", retrypolicy.ErrRequestNotSent)

// parkUncalled parks t's running assignment before any call (a budget,
// quota, price or admission refusal), then settles the holds of the run's
// earlier attempts (see settleEarlierAttempts): only after the park, whose
// success proves the run is over, as the reconciler does.
func (h *Handler) parkUncalled(ctx context.Context, t *ledger.Task, r ledger.Review, log *slog.Logger) result {
	res := h.park(ctx, events.SQSMessage{}, t, ledger.ParkOptions{State: ledger.StateRunning, Version: t.AssignmentVersion}, r, nil, log)
	if res.outcome == OutcomeParked && h.Spend != nil && h.Spend.Budgets != nil && t.Attempts > 1 {
		if _, err := h.Spend.Budgets.SettleAbandoned(ctx, t, t.Attempts); err != nil {
			log.WarnContext(ctx, "settling the parked run's earlier reservations failed; they stay counted until an operator acts on the review", "error", err.Error())
		}
	}
	return res
}
