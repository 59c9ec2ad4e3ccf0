package spend

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// QuotaPrefix starts every daily quota item key in the tasks table.
const QuotaPrefix = "quota#"

// quotaTTL is how long a day's quota item outlives its day.
const quotaTTL = 48 * time.Hour

// QuotasConfig configures Quotas.
type QuotasConfig struct {
	DB DB
	// Table is the tasks table.
	TasksTable string
	Quota      Quota
	// Prices, when set, prices a call's maximum for CallNeed under a USD
	// quota (the worker prices its reservations itself). Optional.
	Prices *Config
	// Now defaults to time.Now.
	Now func() time.Time
}

// Quotas is the per-caller daily quota: Check before accepting a submit;
// Reserve before every provider call of the caller and Settle after it,
// as budgets do (the Accountant's reservations, on the caller's day item),
// so calls in flight can never together hold more than the quota. Safe
// for concurrent use.
//
// What a refusal means depends on what holds the quota (the
// QuotaExceededError's methods): a call larger than the whole quota can
// never run (NeverFits); a call the day's settled usage leaves no room
// for cannot run before the next UTC day; a call whose room is held only
// by the reservations of calls in flight (HeldByCallsInFlight) can run
// once they settle below their reservations.
type Quotas struct {
	c    QuotasConfig
	acct *Accountant
}

// NewQuotas validates cfg and returns Quotas.
func NewQuotas(cfg QuotasConfig) (*Quotas, error) {
	if cfg.DB == nil || cfg.TasksTable == "" {
		return nil, errors.New("spend: DB and TasksTable are required")
	}
	if (cfg.Quota.Unit != UnitTokens && cfg.Quota.Unit != UnitUSD) || cfg.Quota.Limit <= 0 {
		return nil, fmt.Errorf("spend: invalid quota %+v", cfg.Quota)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// A write refreshes the item's expiry to now + a day + quotaTTL: at
	// least quotaTTL after the end of the day it counts (writes come
	// during the day, or after it for a call settled past midnight).
	acct, err := NewAccountant(AccountantConfig{DB: cfg.DB, TasksTable: cfg.TasksTable, Now: cfg.Now, Retention: quotaRetention})
	if err != nil {
		return nil, err
	}
	return &Quotas{c: cfg, acct: acct}, nil
}

// Quota returns the quota q enforces.
func (q *Quotas) Quota() Quota { return q.c.Quota }

var scopeEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// QuotaItemKey returns the tasks-table key of scope's quota on day
// (YYYY-MM-DD, UTC): "quota#<26 base32 chars of SHA-256(scope)>#<day>".
// The scope is hashed so any caller identity makes a short, safe key.
func QuotaItemKey(scope, day string) string {
	sum := sha256.Sum256([]byte(scope))
	return QuotaPrefix + scopeEncoding.EncodeToString(sum[:])[:26] + "#" + day
}

func (q *Quotas) today() (day string, next time.Time, now time.Time) {
	now = q.c.Now().UTC()
	d := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	return d.Format(time.DateOnly), d.AddDate(0, 0, 1), now
}

// budget is the quota as a budget on its one dimension.
func (q *Quotas) budget() Budget {
	if q.c.Quota.Unit == UnitUSD {
		return Budget{MaxCost: Micros(q.c.Quota.Limit)}
	}
	return Budget{MaxTokens: q.c.Quota.Limit}
}

// CallNeed is what a call of model with at most in input and out output
// tokens reserves on the quota, in its unit (in + out tokens, or their
// price in micro-dollars): ok=false when a USD quota cannot price it (no
// Prices, or a model they do not price).
func (q *Quotas) CallNeed(model string, in, out int64) (need int64, ok bool) {
	if q.c.Quota.Unit == UnitTokens {
		return in + out, true
	}
	if q.c.Prices == nil {
		return 0, false
	}
	u, err := q.c.Prices.Usage(model, in, out)
	if err != nil {
		return 0, false
	}
	return int64(u.Cost), true
}

// used is what the quota counts of a day item's state: spent and reserved
// (calls in flight), and of that the reserved part.
func (q *Quotas) used(s State) (used, reserved int64) {
	if q.c.Quota.Unit == UnitUSD {
		return int64(s.Spent.Cost + s.ReservedCost), int64(s.ReservedCost)
	}
	return s.Spent.Tokens() + s.ReservedTokens, s.ReservedTokens
}

// Check returns *QuotaExceededError when scope's settled usage today plus
// want (a call's maximum, CallNeed; pass 0 to ask "anything left?")
// exceeds the quota, with RetryAfter = the time to the next UTC day:
// settled usage never shrinks within its day, so such a call cannot run
// before then. The reservations of calls in flight are not counted: they
// free when their calls settle (usually well below them), and the worker
// waits for that (HeldByCallsInFlight) — a submit refused for them would
// be told to wait a day for room that frees in seconds. A want above the
// whole quota is refused whatever was used (NeverFits). Check writes
// nothing (one consistent GetItem), so a refused submit changes nothing.
func (q *Quotas) Check(ctx context.Context, scope string, want int64) error {
	if want < 0 {
		return fmt.Errorf("spend: negative quota want %d", want)
	}
	day, next, now := q.today()
	item, err := getItem(ctx, q.c.DB, tasksTable{q.c.TasksTable}, QuotaItemKey(scope, day))
	if err != nil {
		return err
	}
	used, reserved := q.used(decodeState(item))
	settled := used - reserved
	if (want == 0 && settled >= q.c.Quota.Limit) || (want > 0 && settled+want > q.c.Quota.Limit) {
		return &QuotaExceededError{Day: day, Unit: q.c.Quota.Unit, Used: used, Reserved: reserved, Limit: q.c.Quota.Limit, Wanted: want, RetryAfter: next.Sub(now)}
	}
	return nil
}

// Used returns scope's usage today: settled calls and the reservations of
// calls in flight.
func (q *Quotas) Used(ctx context.Context, scope string) (int64, error) {
	day, _, _ := q.today()
	item, err := getItem(ctx, q.c.DB, tasksTable{q.c.TasksTable}, QuotaItemKey(scope, day))
	used, _ := q.used(decodeState(item))
	return used, err
}

// QuotaHold is a reservation on a caller's daily quota: the UTC day whose
// item holds it, where Settle must find it (a call reserved before
// midnight and settled after it is counted on the day it started).
type QuotaHold struct{ Day string }

// Reserve reserves r (a call's maximum: input + max output tokens, priced)
// on scope's item for today, if the day's settled usage + reservations + r
// stays within the quota — one conditional UpdateItem (Accountant's
// Reserve), so the calls in flight of one caller can never together hold
// more than the quota, however many workers run them. Reserving the same
// r.ID again on the same day (a lost reply retried, a redelivery)
// reserves nothing more and succeeds. Errors: *QuotaExceededError
// (nothing reserved; Wanted is r's amount in the quota's unit), or a
// DynamoDB error after which the call must not be made — the write may
// have landed all the same (a lost reply, then a refused repeat), so the
// hold returned with it names the day it was made on: give it back with
// SettleIfReserved at nothing.
func (q *Quotas) Reserve(ctx context.Context, scope string, r Reservation) (QuotaHold, error) {
	day, next, now := q.today()
	key := QuotaItemKey(scope, day)
	_, err := q.acct.reserve(ctx, key, key, q.budget(), r)
	var be *BudgetExhaustedError
	if errors.As(err, &be) {
		used, reserved := q.used(be.State)
		return QuotaHold{}, &QuotaExceededError{Day: day, Unit: q.c.Quota.Unit, Used: used, Reserved: reserved, Limit: q.c.Quota.Limit,
			Wanted: q.c.Quota.Of(Usage{InputTokens: r.Tokens, Cost: r.Cost}), RetryAfter: next.Sub(now)}
	}
	if err != nil {
		return QuotaHold{Day: day}, fmt.Errorf("spend: quota: %w", err)
	}
	return QuotaHold{Day: day}, nil
}

// Today is the hold of a reservation made today (for SettleIfReserved of
// one whose day was not kept: a crashed attempt's).
func (q *Quotas) Today() QuotaHold {
	day, _, _ := q.today()
	return QuotaHold{Day: day}
}

// Settle replaces r, reserved under h, by the usage the call reported
// (Accountant's Settle, on h's day item): real usage is always recorded,
// even beyond the quota; a call whose outcome is unknown must be settled
// at its full reservation. Settling again changes nothing.
func (q *Quotas) Settle(ctx context.Context, scope string, h QuotaHold, r Reservation, actual Usage) error {
	if h.Day == "" {
		return errors.New("spend: quota: settle without a hold")
	}
	_, err := q.acct.settle(ctx, QuotaItemKey(scope, h.Day), r, actual)
	if err != nil {
		return fmt.Errorf("spend: quota: %w", err)
	}
	return nil
}

// SettleIfReserved settles r, reserved under h, like Settle when it is
// still reserved, and otherwise does nothing, without a read (the
// Accountant's SettleIfReserved on h's day item: one conditional
// UpdateItem). For a reservation that may not exist: one whose Reserve
// failed (at nothing: no call was made), or a crashed attempt's (in full:
// the provider may have billed it). It reports whether it settled.
func (q *Quotas) SettleIfReserved(ctx context.Context, scope string, h QuotaHold, r Reservation, actual Usage) (bool, error) {
	if h.Day == "" {
		return false, errors.New("spend: quota: settle without a hold")
	}
	ok, err := q.acct.settleIfReserved(ctx, QuotaItemKey(scope, h.Day), r, actual)
	if err != nil {
		return false, fmt.Errorf("spend: quota: %w", err)
	}
	return ok, nil
}

// Add records usage of scope made without a reservation on today's item
// (one UpdateItem; nothing for a zero usage). It is NOT retried: ADD is
// not idempotent, so a lost reply that did not land under-counts it. The
// worker reserves and settles instead (Reserve, Settle); Add is for usage
// recorded after the fact.
func (q *Quotas) Add(ctx context.Context, scope string, u Usage) error {
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.Cost < 0 {
		return fmt.Errorf("spend: negative usage %+v", u)
	}
	if u == (Usage{}) {
		return nil
	}
	day, next, _ := q.today()
	key := QuotaItemKey(scope, day)
	_, err := q.c.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        &q.c.TasksTable,
		Key:              keyOf(key),
		UpdateExpression: aws.String("ADD #ut :t, #uc :c, #si :in, #so :out, #sc :c SET #e = if_not_exists(#e, :exp)"),
		ExpressionAttributeNames: map[string]string{
			"#ut": "used_tokens", "#uc": "used_micros",
			"#si": "spent_input_tokens", "#so": "spent_output_tokens", "#sc": "spent_micros", "#e": "expires_at",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": num(u.Tokens()), ":c": num(int64(u.Cost)), ":in": num(u.InputTokens), ":out": num(u.OutputTokens),
			":exp": num(next.Add(quotaTTL).Unix()),
		},
	})
	if err != nil {
		return fmt.Errorf("spend: add to %s: %w", key, err)
	}
	return nil
}
