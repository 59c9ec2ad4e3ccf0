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
	// Now defaults to time.Now.
	Now func() time.Time
}

// Quotas is the per-caller daily quota: Check before accepting a submit,
// Add what a caller's calls actually used when they are settled. Safe for
// concurrent use.
type Quotas struct{ c QuotasConfig }

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
	return &Quotas{c: cfg}, nil
}

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

// Check returns *QuotaExceededError when scope's usage today plus want
// (pass 0 to ask "anything left?") exceeds the quota, with RetryAfter = the
// time to the next UTC day. It writes nothing (one consistent GetItem), so
// a refused submit changes nothing.
func (q *Quotas) Check(ctx context.Context, scope string, want int64) error {
	if want < 0 {
		return fmt.Errorf("spend: negative quota want %d", want)
	}
	day, next, now := q.today()
	item, err := getItem(ctx, q.c.DB, tasksTable{q.c.TasksTable}, QuotaItemKey(scope, day))
	if err != nil {
		return err
	}
	used := numOf(item["used"])
	if (want == 0 && used >= q.c.Quota.Limit) || (want > 0 && used+want > q.c.Quota.Limit) {
		return &QuotaExceededError{Day: day, Unit: q.c.Quota.Unit, Used: used, Limit: q.c.Quota.Limit, RetryAfter: next.Sub(now)}
	}
	return nil
}

// Used returns scope's usage today.
func (q *Quotas) Used(ctx context.Context, scope string) (int64, error) {
	day, _, _ := q.today()
	item, err := getItem(ctx, q.c.DB, tasksTable{q.c.TasksTable}, QuotaItemKey(scope, day))
	return numOf(item["used"]), err
}

// Add records what one settled call of scope used, on today's item (one
// UpdateItem; nothing when the quota does not count any of u). It is NOT
// retried: ADD is not idempotent, so a lost reply that did not land
// under-counts that one call; the quota is a daily soft cap, checked at
// submit, so in-flight tasks may overrun it by what they use before the next
// Check.
func (q *Quotas) Add(ctx context.Context, scope string, u Usage) error {
	n := q.c.Quota.Of(u)
	if n < 0 {
		return fmt.Errorf("spend: negative usage %+v", u)
	}
	if n == 0 {
		return nil
	}
	day, next, _ := q.today()
	key := QuotaItemKey(scope, day)
	_, err := q.c.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &q.c.TasksTable,
		Key:                       keyOf(key),
		UpdateExpression:          aws.String("ADD #u :n SET #e = if_not_exists(#e, :exp)"),
		ExpressionAttributeNames:  map[string]string{"#u": "used", "#e": "expires_at"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(n), ":exp": num(next.Add(quotaTTL).Unix())},
	})
	if err != nil {
		return fmt.Errorf("spend: add to %s: %w", key, err)
	}
	return nil
}
