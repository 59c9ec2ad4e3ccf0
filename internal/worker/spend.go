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
	r     spend.Reservation
	max   spend.Usage // the reservation as a usage (input + max output tokens, priced)
	model string
	// priced: the price table prices model. An unpriced call is reserved
	// on a token quota by its tokens alone, and charged no cost.
	priced bool
	// budget: reserved on the chain's and the task's budget items.
	budget bool
	// quota: reserved on the caller's daily quota, on this hold's day.
	quota *spend.QuotaHold
}

// model is the model id the provider calls ("" when it does not say), the
// key of the price table.
func (h *Handler) model() string {
	if m, isModeler := h.Provider.(contract.Modeler); isModeler {
		return m.Model()
	}
	return ""
}

// callMaximum is the most a call of t may use (contract.CallMaximumWith),
// the bound both the budget and admission reserve. input is the input as
// the provider gets it: t.Input is empty for an offloaded input.
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

// documentSizes is what the token bound needs of a task's documents.
func documentSizes(docs []ledger.DocumentRef) []contract.DocumentSize {
	out := make([]contract.DocumentSize, len(docs))
	for i, d := range docs {
		out[i] = contract.DocumentSize{Format: d.Format, Size: d.Ref.Size}
	}
	return out
}

// reserve reserves the call's maximum before the call (doc.go, "Spend"):
// the chain's budget item enforces the budget with one conditional
// UpdateItem. ok=false means the provider must not be called and r is the
// record's result. A price that is not configured parks the task
// provider_config (a token quota alone reserves an unpriced call by its
// tokens).
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
		// A token quota needs no price: the call holds its tokens.
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

// reserveBudget is reserve's part on the chain's and the task's budget
// items (rs.budget once both hold it).
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
		// No call follows: what was reserved is given back — the chain's
		// reservation, and a failed write that may have landed all the same
		// (a lost reply, then a refused repeat).
		h.settleBudgets(ctx, t, rs.r, spend.Usage{}, true, "giving back a budget reservation whose write failed", log)
		return h.giveBackUncalled(ctx, rec, t, 0, "budget reservation failed", log, "error", err.Error()), false
	}
	rs.budget = true
	return result{}, true
}

// reserveQuota is reserve's part on the caller's daily quota (rs.quota
// once it holds; doc.go, "Spend"). A refusal or a failed write gives the
// budget reservations back first: no call is made. A failed write may have
// landed all the same (a lost reply, then a refused repeat), so it is
// given back, then the task.
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

// QuotaWait is a task's first wait, plus up to as much again of jitter,
// when only the reservations of calls in flight keep it out of its
// caller's daily quota. Such a reservation frees when its call settles, a
// model call's seconds, so the wait is seconds rather than a lease; a hold
// that does not clear (a crashed attempt's) makes the waits grow
// (quotaWaitFor). The jitter spreads one caller's waiting tasks, which all
// reserve on the same item.
const QuotaWait = 5 * time.Second

// QuotaWaitMax is the longest a quota wait's base grows to (quotaWaitFor):
// a wait lasts at most twice it.
const QuotaWaitMax = 30 * time.Second

// quotaWaitFor is how long a task kept waiting for waited so far (the
// time since its age budget started: no write counts its waits) waits
// again: half of that, at least QuotaWait and at most QuotaWaitMax, plus
// jitter (uniform in [0, d): rand.N) of up to as much again. So the age
// grows by half at least each wait, and by 30 s once the task is a minute
// old: at most 7 claims in its first minute (0, 5, 10, 15, 22.5, 33.75,
// 50.6 s) and 120 in the hour after, where fixed 5–10 s waits cost 720.
func quotaWaitFor(waited time.Duration, jitter func(time.Duration) time.Duration) time.Duration {
	base := min(max(waited/2, QuotaWait), QuotaWaitMax)
	return base + jitter(base)
}

// waitQuota puts the task back to wait for the calls in flight that hold
// its caller's quota (quotaWaitFor), its attempt given back.
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
// items (with ifReserved, only where it is still reserved). A failure is
// logged as what failed and leaves the reservation counted: the safe side.
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

// settleEarlierAttempts settles, in full (the provider may have billed
// them), what the run's earlier attempts still hold on the task's budgets
// and its caller's daily quota before this attempt reserves: an attempt
// whose worker crashed after reserving never settles, and nobody but a
// worker settles a live run, so its hold would count as a call in flight
// (on the quota, all day). Attempt 2 has one attempt behind it, settled
// with one conditional write per item and no read (a refused no-op when
// it settled itself); from attempt 3 on any earlier one may hold, so
// spend.Accountant.SettleAbandoned reads the items. Best effort: a failure
// leaves the holds counted, the safe side.
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

// settle replaces the reservation by what the call used (usedBy), on the
// budget items and on the caller's daily quota, each where it was
// reserved; a task that reserved nothing is accounted (account). Settle
// is idempotent per reservation id; one that fails leaves the reservation
// counted (the safe side).
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
	// Charged to the quota alone, or to nothing, a call is recorded only
	// when it used something. A budgeted call is always priced.
	if rs.budget || used != (spend.Usage{}) {
		log.InfoContext(ctx, "spend recorded", "input_tokens", used.InputTokens, "output_tokens", used.OutputTokens, "cost_usd", used.Cost.String())
		h.usageMetric(t, used, rs.priced)
	}
}

// account is what a call that reserved nothing is settled against (on no
// item), so spend is visible for every task: its priced maximum; nil
// without a price (only the reported tokens are counted) or for a delivery
// (a destination, not a model).
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

// reported is the usage a successful call reported, a negative count read
// as none.
func reported(a attempt) spend.Usage {
	return spend.Usage{InputTokens: int64(max(a.res.Usage.InputTokens, 0)), OutputTokens: int64(max(a.res.Usage.OutputTokens, 0))}
}

// notSent reports whether a failed call provably never left the process
// (retrypolicy.ErrRequestNotSent; errNoCall when the worker made none).
// It is charged nothing whatever ended it, and its attempt is given back
// (failure): the next call is charged for itself.
func notSent(err error) bool {
	return err != nil && errors.Is(err, retrypolicy.ErrRequestNotSent)
}

// usedBy is what an attempt is charged: the reported usage, priced; the
// full reservation for a success without a report and for a call that
// may have acted (the provider may have generated and billed); nothing
// for a refusal in so many words or a call never sent.
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
	// Sent, and not refused in so many words: a 5xx from a gateway in
	// front of the model does not say the model did not generate (and
	// bill), so the call is charged its reservation (retries of 502s
	// would otherwise spend while the budget showed zero).
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

// MetricBoundExceeded counts provider calls that reported more tokens
// than their bound (callMaximum), which the budget reserved and admission
// estimated: a per-document or prompt bound failed for this model. The
// call is still settled with the reported usage.
const MetricBoundExceeded = "BoundExceeded"

// checkBound logs and counts (MetricBoundExceeded) a successful call
// whose reported usage is above its bound.
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

// errNoCall settles a reservation whose call was never made (the
// call-start mark was refused): nothing is charged.
var errNoCall = fmt.Errorf("worker: no provider call was made: %w", retrypolicy.ErrRequestNotSent)

// parkUncalled parks t's running assignment before its attempt called the
// provider (a budget, quota, price or admission refusal), then settles
// what the run's earlier attempts still hold (spend.Accountant.SettleAbandoned;
// see settleEarlierAttempts): nothing runs the task again until an
// operator acts. After the park, as the reconciler does: its success
// proves the run is over. Best effort, logged.
func (h *Handler) parkUncalled(ctx context.Context, t *ledger.Task, r ledger.Review, log *slog.Logger) result {
	res := h.park(ctx, events.SQSMessage{}, t, ledger.ParkOptions{State: ledger.StateRunning, Version: t.AssignmentVersion}, r, nil, log)
	if res.outcome == OutcomeParked && h.Spend != nil && h.Spend.Budgets != nil && t.Attempts > 1 {
		if _, err := h.Spend.Budgets.SettleAbandoned(ctx, t, t.Attempts); err != nil {
			log.WarnContext(ctx, "settling the parked run's earlier reservations failed; they stay counted until an operator acts on the review", "error", err.Error())
		}
	}
	return res
}
