package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Spend control at submit (DESIGN §13, package spend).
const (
	// TypeQuotaExceeded is the 429 of a caller over its daily quota.
	TypeQuotaExceeded = ProblemBase + "quota-exceeded"
	// TypeExceedsDailyQuota is the 422 of a task whose one provider call
	// may use more than the caller's whole daily quota: no day has room
	// for it (refuseOverQuota).
	TypeExceedsDailyQuota = ProblemBase + "exceeds-daily-quota"
	// TypeBudgetRecordExpired is the 409 of a regenerate of a budgeted
	// parent whose chain's budget record is gone though it may have held
	// spend (spend.RecordExpiredError).
	TypeBudgetRecordExpired = ProblemBase + "budget-record-expired"
	// MaxBudgetTokens is the largest accepted budget.max_total_tokens.
	MaxBudgetTokens = 1_000_000_000_000
	// MaxBudgetUSD is the largest accepted budget.max_cost_usd.
	MaxBudgetUSD = 1_000_000
)

// budgetSpec is a validated "budget" member of a submit body.
type budgetSpec struct {
	tokens int64
	micros spend.Micros
}

func (b *budgetSpec) present() bool { return b != nil && (b.tokens > 0 || b.micros > 0) }

// canonical is the budget's canonical JSON (keys sorted, the cost with six
// decimals, absent dimensions left out), hashed into the payload hash.
func (b *budgetSpec) canonical() string {
	var buf bytes.Buffer
	buf.WriteByte('{')
	if b.micros > 0 {
		buf.WriteString(`"max_cost_usd":` + b.micros.String())
	}
	if b.tokens > 0 {
		if b.micros > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`"max_total_tokens":` + strconv.FormatInt(b.tokens, 10))
	}
	buf.WriteByte('}')
	return buf.String()
}

func invalidBudget(field, detail string) *Problem {
	return invalidBody(field, detail)
}

// parseBudget validates {"max_total_tokens":N,"max_cost_usd":x}: an object
// with at least one of them, nothing else, each at most once; N a whole
// number from 1 to MaxBudgetTokens; x a plain decimal above 0 with at most
// 6 decimals, up to MaxBudgetUSD.
func parseBudget(raw json.RawMessage) (*budgetSpec, *Problem) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalidBudget("budget", `Field "budget" must be an object {"max_total_tokens": N, "max_cost_usd": x} with at least one of them.`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, malformed("The budget is not valid JSON.")
	}
	var b budgetSpec
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed("The budget is not valid JSON.")
		}
		key, _ := tok.(string)
		field := "budget." + clip(key, 40)
		if key != "max_total_tokens" && key != "max_cost_usd" {
			return nil, invalidBudget(field, fmt.Sprintf("Unknown budget field %q; the allowed fields are max_total_tokens, max_cost_usd.", clip(key, 40)))
		}
		if seen[key] {
			return nil, invalidBudget(field, fmt.Sprintf("The budget field %q appears more than once.", key))
		}
		seen[key] = true
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, malformed("The budget is not valid JSON.")
		}
		n, ok := v.(json.Number)
		if key == "max_total_tokens" {
			i, err := strconv.ParseInt(string(n), 10, 64)
			if !ok || err != nil || i < 1 || i > MaxBudgetTokens {
				return nil, invalidBudget(field, fmt.Sprintf("budget.max_total_tokens must be a whole number from 1 to %d.", int64(MaxBudgetTokens)))
			}
			b.tokens = i
			continue
		}
		m, err := spend.ParseUSD(string(n))
		if !ok || err != nil || m <= 0 || m > MaxBudgetUSD*spend.MicrosPerUSD {
			return nil, invalidBudget(field, fmt.Sprintf("budget.max_cost_usd must be a plain decimal number of US dollars above 0 with at most 6 decimals (no exponent), up to %d.", MaxBudgetUSD))
		}
		b.micros = m
	}
	if !b.present() {
		return nil, invalidBudget("budget", `Field "budget" needs at least one of max_total_tokens and max_cost_usd.`)
	}
	return &b, nil
}

// budgetCoversOneCall refuses a token budget that could never cover one
// provider call of the task (the worker reserves
// contract.CallMaximumWith — the prompt, each of docs, the output — before
// every call), so the task would only ever be parked. The cost dimension
// depends on the worker's model and prices and is checked there. With
// documents the detail names each one and its bound.
func budgetCoversOneCall(b *budgetSpec, rawInput json.RawMessage, docs ...ledger.DocumentRef) *Problem {
	if b.tokens <= 0 {
		return nil
	}
	g, err := contract.ParseGenerateInput(rawInput)
	if err != nil {
		return nil // parseInput has accepted it; nothing to add
	}
	sizes := documentSizes(docs)
	in, out := contract.CallMaximumWith(g, sizes)
	if in+out <= b.tokens {
		return nil
	}
	if len(docs) == 0 {
		return invalidBudget("budget.max_total_tokens", fmt.Sprintf(
			"budget.max_total_tokens %d cannot cover one provider call of this task, which reserves up to %d tokens (%d for the input: its bytes + %d, and %d for the output: input.max_tokens, or %d when unset); raise the budget or set a lower input.max_tokens.",
			b.tokens, in+out, in, contract.InputOverheadTokens, out, contract.MaxTokensLimit))
	}
	prompt, _ := contract.CallMaximum(g)
	var named strings.Builder
	for i, d := range docs {
		if i > 0 {
			named.WriteString(", ")
		}
		fmt.Fprintf(&named, "documents[%d] (upload %s, %s, %d bytes): %d", i, d.UploadID, d.Format, d.Ref.Size, contract.DocumentTokens(sizes[i]))
	}
	return invalidBudget("budget.max_total_tokens", fmt.Sprintf(
		"budget.max_total_tokens %d cannot cover one provider call of this task, which reserves up to %d tokens: %d for the prompt (its bytes + %d), %d for its documents (%s; text is bounded by its bytes, an image by %d, a pdf or docx by %d, each + %d), and %d for the output (input.max_tokens, or %d when unset); raise the budget, or use fewer or smaller documents. Nothing was recorded.",
		b.tokens, in+out, prompt, contract.InputOverheadTokens, in-prompt, named.String(), contract.ImageTokens,
		contract.OpaqueDocumentTokens, contract.DocumentOverheadTokens, out, contract.MaxTokensLimit))
}

// budgetHash is the payload hash of a submit with a budget: SHA-256 over
// {"budget":<canonical budget>,"input":<input>,"kind":<kind>} (a submit
// without one keeps the hash payloadHash gives, so old keys still replay).
func budgetHash(kind, canonicalInput string, b *budgetSpec) string {
	if !b.present() {
		return payloadHash(kind, canonicalInput, "")
	}
	var buf bytes.Buffer
	buf.WriteString(`{"budget":`)
	buf.WriteString(b.canonical())
	buf.WriteString(`,"input":`)
	buf.WriteString(canonicalInput)
	buf.WriteString(`,"kind":`)
	buf.Write(jsonString(kind))
	buf.WriteByte('}')
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

// withBudget puts a submit's budget on the new task.
func withBudget(n ledger.NewTask, b *budgetSpec) ledger.NewTask {
	if b.present() {
		n.BudgetMaxTokens, n.BudgetMaxMicros = b.tokens, int64(b.micros)
	}
	return n
}

// inheritBudget gives a regenerate its chain's budget: the parent's limits
// and the chain's root (the parent's root, or the parent itself).
func inheritBudget(n ledger.NewTask, parent *ledger.Task) ledger.NewTask {
	if parent.HasBudget() {
		n.BudgetMaxTokens, n.BudgetMaxMicros = parent.BudgetMaxTokens, parent.BudgetMaxMicros
		n.ChainRoot, n.ChainEpochMs = parent.Chain(), parent.ChainEpoch()
	}
	return n
}

// extendChainBudget extends the budget item of a budgeted parent's chain
// (spend.Accountant.Extend, one conditional UpdateItem; nothing for an
// unbudgeted parent or without Budgets) before a regenerate joins it. A
// worker's reserve and settle keep the item only while the chain's tasks
// call the provider; a chain that grows by regenerates of tasks that never
// did (cancelled while queued, parked before their call) would otherwise
// outlive its budget item, and the next task that calls would start again
// from nothing spent. A failure is a 503 before the task is recorded. A
// chain whose item is gone though it may have held spend (a parent parked
// for longer than the item's retention: spend.Accountant.Keep) is a 409
// budget-record-expired, nothing recorded.
func (h *Handler) extendChainBudget(ctx context.Context, c *call, parent *ledger.Task) *Problem {
	if h.Budgets == nil || !parent.HasBudget() {
		return nil
	}
	err := h.Budgets.Keep(ctx, parent, spend.ChainKeyOf(parent))
	var re *spend.RecordExpiredError
	if errors.As(err, &re) {
		c.outcome = "budget_record_expired"
		return newProblem(TypeBudgetRecordExpired, http.StatusConflict, "Budget record expired",
			fmt.Sprintf("The parent task was created %s and its regenerate chain's budget record is gone (it is kept %s after the chain's last reservation), so what the chain spent is not known; a regenerate would start its budget from nothing spent. Nothing was recorded. Submit a new task with its own budget instead.",
				re.Created.Format(time.RFC3339), re.Retention))
	}
	if err != nil {
		h.log().ErrorContext(ctx, "api: extending the chain's budget failed", "task_id", parent.TaskID, "error", err.Error())
		c.outcome = "budget_unavailable"
		p := throttled(time.Second)
		p.Type, p.Title = TypeUnavailable, "Service unavailable"
		p.Detail = "The regenerate chain's budget record could not be extended; no task was recorded. Retrying with the same Idempotency-Key is safe."
		return p
	}
	return nil
}

// overQuota checks the caller's daily quota before anything is written (one
// consistent GetItem, only when a quota is configured): 429 with
// Retry-After (seconds to the next UTC day) when the day's settled usage
// leaves no room for want — one call of the task (quotaWant: its input's
// bound, without documents, which only add to it), or 0: "is anything
// left?" — since settled usage only grows within the day, such a call
// cannot run before then. The reservations of calls in flight are not
// counted (spend.Quotas.Check): they free when the calls settle, usually
// within seconds and below what they held, and the worker waits for them;
// a submit refused for them would be told to wait a day. A want larger
// than the whole quota is left to refuseOverQuota's 422 (no day has room
// for it). A task already recorded under key (one more GetItem, on the
// refusal only) is never refused: a retried submission returns its task
// whatever the quota (adversarial review: a 202 lost, the task's own call
// then used the quota up, and its retry was told to come back tomorrow as
// if nothing existed).
func (h *Handler) overQuota(ctx context.Context, c *call, key string, want int64) *Problem {
	if h.Quotas == nil {
		return nil
	}
	if want > h.Quotas.Quota().Limit {
		want = 0
	}
	err := h.Quotas.Check(ctx, c.scope, want)
	var qe *spend.QuotaExceededError
	if errors.As(err, &qe) {
		recorded, p := h.recorded(ctx, c, key)
		if p != nil {
			return p
		}
		if recorded {
			return nil
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.As(err, &qe):
		c.outcome = "over_quota"
		h.count(ctx, "", "QuotaExceeded")
		amount := quotaAmount(qe.Unit)
		detail := fmt.Sprintf("This caller's settled provider calls used %s of its daily quota of %s on %s (UTC); nothing was written. Retry after the delay in Retry-After (the next UTC day).",
			amount(qe.Settled()), amount(qe.Limit), qe.Day)
		if want > 0 {
			detail = fmt.Sprintf("This caller's settled provider calls used %s of its daily quota of %s on %s (UTC), which leaves no room for one provider call of this task (up to %s); nothing was written. Retry after the delay in Retry-After (the next UTC day), or submit a smaller call (a lower input.max_tokens, a shorter input).",
				amount(qe.Settled()), amount(qe.Limit), qe.Day, amount(want))
		}
		p := newProblem(TypeQuotaExceeded, http.StatusTooManyRequests, "Daily quota exceeded", detail)
		p.RetryAfter = int(qe.RetryAfterSeconds())
		return p
	}
	h.log().ErrorContext(ctx, "api: quota read failed", "error", err.Error())
	p := throttled(time.Second)
	p.Type, p.Title = TypeUnavailable, "Service unavailable"
	p.Detail = "The caller's quota could not be read; nothing was written. Retrying with the same Idempotency-Key is safe."
	c.outcome = "quota_unavailable"
	return p
}

// quotaAmount formats an amount of a quota in unit u.
func quotaAmount(u spend.Unit) func(int64) string {
	if u == spend.UnitUSD {
		return func(n int64) string { return spend.Micros(n).String() + " USD" }
	}
	return func(n int64) string { return strconv.FormatInt(n, 10) + " tokens" }
}

// quotaWant is what one provider call of a task of kind with input
// reserves on the caller's daily quota, without its documents (not
// resolved yet; they only add to it): 0 without a quota, for a task that
// calls no model (deliver), or when it cannot be priced.
func (h *Handler) quotaWant(kind, input string) int64 {
	if h.Quotas == nil || kind != contract.KindGenerate {
		return 0
	}
	_, _, need, _ := h.callNeed(input, nil)
	return need
}

// callNeed is what one provider call of a generate task with input and
// docs reserves on the caller's daily quota: its bound (in input and out
// output tokens, contract.CallMaximumWith) in the quota's unit (need:
// spend.Quotas.CallNeed, for the worker's model under a USD quota);
// ok=false when need cannot be told (an input that does not parse, a USD
// quota without the model's price).
func (h *Handler) callNeed(input string, docs []ledger.DocumentRef) (in, out, need int64, ok bool) {
	g, err := contract.ParseGenerateInput(json.RawMessage(input))
	if err != nil {
		return 0, 0, 0, false
	}
	in, out = contract.CallMaximumWith(g, documentSizes(docs))
	model := ""
	if h.Provider != nil {
		model = h.Provider.Model
	}
	need, ok = h.Quotas.CallNeed(model, in, out)
	return in, out, need, ok
}

// refuseOverQuota refuses a generate task one provider call of which
// (input and docs, resolved; nothing copied or written yet) may use more
// than the caller's whole daily quota: the worker reserves that much on
// the quota before the call, so no day has room for it and it could only
// be parked — 422 exceeds-daily-quota, as a call above the model's
// tokens_per_minute is refused. A replay of a task recorded under key is
// answered instead (refuse). No quota, or a call the quota cannot price:
// no check (the worker's park, review.QuotaExceeded, is the backstop).
func (h *Handler) refuseOverQuota(ctx context.Context, c *call, key, input string, docs []ledger.DocumentRef) *Problem {
	if h.Quotas == nil {
		return nil
	}
	in, out, need, ok := h.callNeed(input, docs)
	limit := h.Quotas.Quota().Limit
	if !ok || need <= limit {
		return nil
	}
	amount := quotaAmount(h.Quotas.Quota().Unit)
	field := "input"
	if len(docs) > 0 {
		field = "documents"
	}
	p := newProblem(TypeExceedsDailyQuota, http.StatusUnprocessableEntity, "Exceeds the daily quota",
		fmt.Sprintf("One provider call of this task may use up to %s (%d input tokens: the prompt's bytes + %d and each document's bound; %d output tokens: input.max_tokens, or %d when unset), more than this caller's whole daily quota of %s: the worker reserves a call's maximum on the quota before the call, so no day has room for it; nothing was recorded. Set a lower input.max_tokens, shorten the input or use fewer or smaller documents, or ask for a larger daily quota.",
			amount(need), in, contract.InputOverheadTokens, out, contract.MaxTokensLimit, amount(limit))).withField(field)
	return h.refuse(ctx, c, key, "exceeds_daily_quota", p)
}

// UsageView is what a task (or its regenerate chain) has spent: settled
// provider calls, as the provider reported them, priced by the price table.
type UsageView struct {
	InputTokens  int64       `json:"input_tokens"`
	OutputTokens int64       `json:"output_tokens"`
	CostUSD      json.Number `json:"cost_usd"`
}

// BudgetView is a task's spend budget (a regenerate's is its chain's).
type BudgetView struct {
	MaxTotalTokens int64       `json:"max_total_tokens,omitempty"`
	MaxCostUSD     json.Number `json:"max_cost_usd,omitempty"`
}

func usageView(s *spend.State) *UsageView {
	return &UsageView{InputTokens: s.Spent.InputTokens, OutputTokens: s.Spent.OutputTokens, CostUSD: json.Number(s.Spent.Cost.String())}
}

// spendView adds a budgeted task's budget and usage to v: its own usage
// and its regenerate chain's (the root's chain is itself and its
// regenerates), two consistent GetItems.
// Without a Budgets accountant, or when a read fails (logged), usage is
// left out.
//
// fresh: the 202 of the submit that just created t — nothing can have
// reserved on it or its chain yet, so its zero usage is shown without the
// reads (the submit stays at its call floor).
func (h *Handler) spendView(ctx context.Context, t *ledger.Task, v *TaskView, fresh bool) {
	if !t.HasBudget() {
		return
	}
	v.Budget = &BudgetView{MaxTotalTokens: t.BudgetMaxTokens}
	if t.BudgetMaxMicros > 0 {
		v.Budget.MaxCostUSD = json.Number(spend.Micros(t.BudgetMaxMicros).String())
	}
	if h.Budgets == nil {
		return
	}
	if fresh && t.Chain() == t.TaskID {
		v.Usage, v.ChainUsage = usageView(&spend.State{}), usageView(&spend.State{})
		return
	}
	own, err := h.Budgets.Get(ctx, spend.TaskKeyOf(t))
	if err != nil {
		h.log().WarnContext(ctx, "api: budget item unavailable", "task_id", t.TaskID, "error", err.Error())
		return
	}
	v.Usage = usageView(own)
	chain, err := h.Budgets.Get(ctx, spend.ChainKeyOf(t))
	if err != nil {
		h.log().WarnContext(ctx, "api: chain budget item unavailable", "task_id", t.TaskID, "error", err.Error())
		return
	}
	v.ChainUsage = usageView(chain)
}
