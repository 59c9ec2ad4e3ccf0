package spend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// BudgetPrefix starts every budget item key in the tasks table.
const BudgetPrefix = "spend#"

// DefaultRetention is how long a budget item outlives its last write or
// Extend (its TTL, expires_at). It must outlast everything that can still
// reserve on the item after that: a task of the chain that spent may wait
// up to ledger.MaxApprovalTTL for approval (no write to the budget item
// meanwhile), then stays ledger.DefaultRetention as a terminal task that
// can be regenerated — and the regenerate inherits the chain's budget.
// RetentionMargin covers the task's own attempts (its age budget, 1 hour
// by default) and clocks. An item deleted sooner would let the chain's
// next task start again from nothing spent (DESIGN §13).
const DefaultRetention = ledger.MaxApprovalTTL + ledger.DefaultRetention + RetentionMargin

// RetentionMargin is DefaultRetention's slack beyond the longest approval
// wait and the tasks' retention.
const RetentionMargin = 3 * 24 * time.Hour

// Budget is a task's or chain's limit across attempts. A zero field means
// no limit on that dimension.
type Budget struct {
	MaxTokens int64
	MaxCost   Micros
}

// Reservation is what one attempt's call may use at most, priced (see
// Config.Usage with the call's input and max output tokens). ID must be
// unique per attempt: the worker uses the task id and its attempt number,
// e.g. "t_abc.a3" (an attempt given back without a call reuses its id).
type Reservation struct {
	ID     string
	Tokens int64
	Cost   Micros
}

// State is a budget item: what was spent (settled), and what attempts in
// flight have reserved.
type State struct {
	Spent          Usage
	ReservedTokens int64
	ReservedCost   Micros
}

// Remaining returns what b leaves after spent and reserved (never
// negative; the dimension's maximum int64 when b does not limit it).
func (s State) Remaining(b Budget) (tokens int64, cost Micros) {
	tokens, cost = 1<<63-1, 1<<63-1
	if b.MaxTokens > 0 {
		tokens = max(b.MaxTokens-s.Spent.Tokens()-s.ReservedTokens, 0)
	}
	if b.MaxCost > 0 {
		cost = max(b.MaxCost-s.Spent.Cost-s.ReservedCost, 0)
	}
	return tokens, cost
}

// DB is the part of the DynamoDB client the Accountant and Quotas use.
type DB interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// AccountantConfig configures an Accountant.
type AccountantConfig struct {
	DB DB
	// Table is the tasks table.
	TasksTable string
	// Now defaults to time.Now; Retention to DefaultRetention.
	Now       func() time.Time
	Retention time.Duration
	// MaxAttempts bounds the writes of one Reserve or Settle when replies
	// are lost (default 3). Both are idempotent, so retrying is safe.
	MaxAttempts int
}

// Accountant reserves and settles budgets. Safe for concurrent use.
type Accountant struct{ c AccountantConfig }

// NewAccountant validates cfg and returns an Accountant.
func NewAccountant(cfg AccountantConfig) (*Accountant, error) {
	if cfg.DB == nil || cfg.TasksTable == "" {
		return nil, errors.New("spend: DB and TasksTable are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	return &Accountant{c: cfg}, nil
}

// BudgetItemKey returns the tasks-table key of the budget of a task or of a
// regenerate chain (pass the chain root's task id).
func BudgetItemKey(budgetKey string) string { return BudgetPrefix + budgetKey }

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

func checkKey(budgetKey string) error {
	if !idPattern.MatchString(budgetKey) {
		return fmt.Errorf("spend: budget key %q must match %s", budgetKey, idPattern)
	}
	return nil
}

// attr names the reservation's attribute on the budget item: a hash of the
// id, so the name holds only [0-9a-f_] (kumo reads a "." inside a name
// placeholder as a document path).
func (r Reservation) attr() string {
	sum := sha256.Sum256([]byte(r.ID))
	return "rsv_" + hex.EncodeToString(sum[:12])
}

func (r Reservation) value() string {
	return strconv.FormatInt(r.Tokens, 10) + ":" + strconv.FormatInt(int64(r.Cost), 10)
}

// Reserve adds r to the budget item of budgetKey if spent + reserved + r
// stays within b (one conditional UpdateItem), so concurrent attempts can
// never together reserve more than b. It returns the state after the
// reservation. Reserving the same r.ID again (a retry after a lost reply,
// or a redelivered message) reserves nothing more and succeeds.
// Errors: *BudgetExhaustedError (nothing reserved), or a DynamoDB error
// after which the call must not be made.
func (a *Accountant) Reserve(ctx context.Context, budgetKey string, b Budget, r Reservation) (*State, error) {
	if err := checkKey(budgetKey); err != nil {
		return nil, err
	}
	return a.reserve(ctx, BudgetItemKey(budgetKey), budgetKey, b, r)
}

// reserve is Reserve on the tasks-table item key (a budget's, or a daily
// quota's: Quotas.Reserve); name is the budget key a refusal names.
func (a *Accountant) reserve(ctx context.Context, key, name string, b Budget, r Reservation) (*State, error) {
	if !idPattern.MatchString(r.ID) || r.Tokens < 0 || r.Cost < 0 || b.MaxTokens < 0 || b.MaxCost < 0 {
		return nil, fmt.Errorf("spend: invalid reservation %q (%d tokens, %s USD) or budget %+v", r.ID, r.Tokens, r.Cost, b)
	}
	if (b.MaxTokens > 0 && r.Tokens > b.MaxTokens) || (b.MaxCost > 0 && r.Cost > b.MaxCost) {
		// Can never fit: report the state without writing.
		item, err := a.get(ctx, key)
		if err != nil {
			return nil, err
		}
		return nil, &BudgetExhaustedError{Key: name, Budget: b, State: decodeState(item), Wanted: r}
	}
	return a.hold(ctx, key, name, b, r, "")
}

// hold writes r under its id in place of old, the value held there (""
// for none: a new reservation), with one conditional UpdateItem: used
// grows by the difference, which must fit b. Found held as r already (our
// lost write landed, or a redelivery), it reserves nothing more and
// succeeds. Found held with other amounts — an attempt number reused after
// a give-back or a crash, reserved by a worker that bounded the call
// differently (another price table, model or input bound) — the hold is
// resized to r once, if the difference fits: answering "already reserved"
// would let a call of r's size run on a smaller hold whose Settle is
// refused. Refused, any old hold stays (settled with its run:
// SettleAbandoned) and nothing of r is reserved.
func (a *Accountant) hold(ctx context.Context, key, name string, b Budget, r Reservation, old string) (*State, error) {
	var prev Reservation
	cond := "attribute_not_exists(#rsv)"
	vals := map[string]types.AttributeValue{
		":r": str(r.value()), ":mt": num(b.MaxTokens), ":mc": num(int64(b.MaxCost)), ":exp": num(a.expiry()),
	}
	if old != "" {
		var ok bool
		if prev, ok = parseReservation(r.ID, old); !ok {
			return nil, fmt.Errorf("spend: reservation %s on %s holds %q, not tokens:micros", r.ID, key, old)
		}
		cond, vals[":old"] = "#rsv = :old", str(old)
	}
	dt, dc := r.Tokens-prev.Tokens, int64(r.Cost-prev.Cost)
	vals[":dt"], vals[":dc"] = num(dt), num(dc)
	// A new reservation must fit even at nothing (a budget already spent
	// past its limit refuses it); a resize only by what it adds.
	if b.MaxTokens > 0 && (old == "" || dt > 0) {
		cond += " AND (attribute_not_exists(#ut) OR #ut <= :troom)"
		vals[":troom"] = num(b.MaxTokens - dt)
	}
	if b.MaxCost > 0 && (old == "" || dc > 0) {
		cond += " AND (attribute_not_exists(#uc) OR #uc <= :croom)"
		vals[":croom"] = num(int64(b.MaxCost) - dc)
	}
	in := &dynamodb.UpdateItemInput{
		TableName:           &a.c.TasksTable,
		Key:                 keyOf(key),
		UpdateExpression:    aws.String("ADD #ut :dt, #uc :dc SET #rsv = :r, #mt = :mt, #mc = :mc, #e = :exp"),
		ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: map[string]string{
			"#ut": "used_tokens", "#uc": "used_micros", "#rsv": r.attr(),
			"#mt": "max_tokens", "#mc": "max_micros", "#e": "expires_at",
		},
		ExpressionAttributeValues:           vals,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	out, item, err := a.write(ctx, key, in)
	if err != nil {
		return nil, fmt.Errorf("spend: reserve %s on %s: %w", r.ID, key, err)
	}
	if out != nil {
		s := decodeState(out.Attributes)
		return &s, nil
	}
	switch held, ok := item[r.attr()].(*types.AttributeValueMemberS); {
	case ok && held.Value == r.value():
		s := decodeState(item)
		return &s, nil
	case ok && old == "":
		return a.hold(ctx, key, name, b, r, held.Value)
	}
	return nil, &BudgetExhaustedError{Key: name, Budget: b, State: decodeState(item), Wanted: r}
}

// Settle replaces reservation r by the usage the provider reported (one
// conditional UpdateItem): spent grows by actual, reserved shrinks by r.
// Settling r again (a retry after a lost reply) changes nothing and
// succeeds. Real spend is always recorded, even beyond the budget (the
// provider charged it); the next Reserve is then refused. An attempt whose
// outcome is unknown must be settled at its full reservation (the provider
// may have charged), never forgotten. Errors: a reservation recorded with
// other amounts than r (a caller bug), or DynamoDB errors.
func (a *Accountant) Settle(ctx context.Context, budgetKey string, r Reservation, actual Usage) (*State, error) {
	if err := checkKey(budgetKey); err != nil {
		return nil, err
	}
	return a.settle(ctx, BudgetItemKey(budgetKey), r, actual)
}

// settle is Settle on the tasks-table item key (a budget's, or a daily
// quota's: Quotas.Settle).
func (a *Accountant) settle(ctx context.Context, key string, r Reservation, actual Usage) (*State, error) {
	if !idPattern.MatchString(r.ID) || actual.InputTokens < 0 || actual.OutputTokens < 0 || actual.Cost < 0 {
		return nil, fmt.Errorf("spend: invalid settle of %q with %+v", r.ID, actual)
	}
	in := a.settleInput(key, r, actual)
	out, item, err := a.write(ctx, key, in)
	if err != nil {
		return nil, fmt.Errorf("spend: settle %s on %s: %w", r.ID, key, err)
	}
	if out != nil {
		s := decodeState(out.Attributes)
		return &s, nil
	}
	if v, ok := item[r.attr()]; ok {
		return nil, fmt.Errorf("spend: settle %s on %s: reserved as %v, not %s (tokens:micros)", r.ID, key, strOf(v), r.value())
	}
	// Already settled (our lost write landed) — or never reserved, which a
	// caller that only settles what Reserve returned cannot do.
	s := decodeState(item)
	return &s, nil
}

// settleInput is Settle's conditional UpdateItem.
func (a *Accountant) settleInput(key string, r Reservation, actual Usage) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:           &a.c.TasksTable,
		Key:                 keyOf(key),
		UpdateExpression:    aws.String("REMOVE #rsv ADD #ut :dt, #uc :dc, #si :in, #so :out, #sc :c SET #e = :exp"),
		ConditionExpression: aws.String("#rsv = :r"),
		ExpressionAttributeNames: map[string]string{
			"#ut": "used_tokens", "#uc": "used_micros", "#rsv": r.attr(),
			"#si": "spent_input_tokens", "#so": "spent_output_tokens", "#sc": "spent_micros", "#e": "expires_at",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":dt": num(actual.Tokens() - r.Tokens), ":dc": num(int64(actual.Cost - r.Cost)),
			":in": num(actual.InputTokens), ":out": num(actual.OutputTokens), ":c": num(int64(actual.Cost)),
			":r": str(r.value()), ":exp": num(a.expiry()),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// SettleIfReserved settles r like Settle when it is still reserved, and
// otherwise does nothing — without reading the item to tell why (already
// settled, never reserved, or reserved at other amounts). For settling a
// reservation whose attempt may have settled it itself (the previous
// attempt's, after a crash), where a refusal is the common, harmless case.
// Invalid input is an error; so are DynamoDB errors.
func (a *Accountant) SettleIfReserved(ctx context.Context, budgetKey string, r Reservation, actual Usage) (settled bool, err error) {
	if err := checkKey(budgetKey); err != nil {
		return false, err
	}
	return a.settleIfReserved(ctx, BudgetItemKey(budgetKey), r, actual)
}

// settleIfReserved is SettleIfReserved on the tasks-table item key (a
// budget's, or a daily quota's: Quotas.SettleIfReserved).
func (a *Accountant) settleIfReserved(ctx context.Context, key string, r Reservation, actual Usage) (settled bool, err error) {
	if !idPattern.MatchString(r.ID) || actual.InputTokens < 0 || actual.OutputTokens < 0 || actual.Cost < 0 {
		return false, fmt.Errorf("spend: invalid settle of %q with %+v", r.ID, actual)
	}
	in := a.settleInput(key, r, actual)
	in.ReturnValues, in.ReturnValuesOnConditionCheckFailure = types.ReturnValueNone, types.ReturnValuesOnConditionCheckFailureNone
	// A refusal (a repeat after a lost reply lands there too: settled)
	// is not read.
	out, _, err := a.writeWith(ctx, key, in, false)
	if err != nil {
		return false, fmt.Errorf("spend: settle %s on %s: %w", r.ID, key, err)
	}
	return out != nil, nil
}

// Extend moves the expiry of budgetKey's item to now + Retention when the
// item exists and would expire sooner (one conditional UpdateItem, no
// read; nothing is written for an item that does not exist — nothing was
// reserved on it — or already lives longer). Call it when a task joins a
// chain (a regenerate): Reserve and Settle refresh the expiry only when a
// task calls the provider, and a chain can grow by regenerates of tasks
// that never did, each one the ledger keeps for its own retention. It
// reports whether it moved the expiry.
func (a *Accountant) Extend(ctx context.Context, budgetKey string) (extended bool, err error) {
	if err := checkKey(budgetKey); err != nil {
		return false, err
	}
	key := BudgetItemKey(budgetKey)
	in := &dynamodb.UpdateItemInput{
		TableName:                &a.c.TasksTable,
		Key:                      keyOf(key),
		UpdateExpression:         aws.String("SET #e = :exp"),
		ConditionExpression:      aws.String("attribute_exists(#k) AND (attribute_not_exists(#e) OR #e < :exp)"),
		ExpressionAttributeNames: map[string]string{"#k": "task_id", "#e": "expires_at"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":exp": num(a.expiry()),
		},
	}
	out, _, err := a.writeWith(ctx, key, in, false)
	if err != nil {
		return false, fmt.Errorf("spend: extend %s: %w", key, err)
	}
	return out != nil, nil
}

// Get returns the budget state of budgetKey (zero when nothing was
// reserved yet), with a consistent read.
func (a *Accountant) Get(ctx context.Context, budgetKey string) (*State, error) {
	if err := checkKey(budgetKey); err != nil {
		return nil, err
	}
	item, err := a.get(ctx, BudgetItemKey(budgetKey))
	if err != nil {
		return nil, err
	}
	s := decodeState(item)
	return &s, nil
}

// write performs in, retrying ambiguous failures (it is idempotent). It
// returns the output on success, or the item as it stood when the condition
// failed (ALL_OLD, or a consistent read where the engine omits it).
func (a *Accountant) write(ctx context.Context, key string, update *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, map[string]types.AttributeValue, error) {
	return a.writeWith(ctx, key, update, true)
}

// writeWith is write; without readOnRefusal a refused condition returns
// (nil, nil, nil), the item not read when the engine did not return it.
func (a *Accountant) writeWith(ctx context.Context, key string, update *dynamodb.UpdateItemInput, readOnRefusal bool) (*dynamodb.UpdateItemOutput, map[string]types.AttributeValue, error) {
	// Named after the table here, so internal/templatetest can see which
	// table the write addresses.
	in := onTable(update, a.c.TasksTable)
	var err error
	for attempt := 1; attempt <= a.c.MaxAttempts; attempt++ {
		var out *dynamodb.UpdateItemOutput
		out, err = a.c.DB.UpdateItem(ctx, in)
		if err == nil {
			return out, nil, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if len(ccf.Item) > 0 || !readOnRefusal {
				return nil, ccf.Item, nil
			}
			item, gerr := a.get(ctx, key)
			return nil, item, gerr
		}
		if !ambiguous(err) || ctx.Err() != nil {
			return nil, nil, err
		}
	}
	return nil, nil, fmt.Errorf("outcome unknown after %d writes: %w", a.c.MaxAttempts, err)
}

func (a *Accountant) get(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	return getItem(ctx, a.c.DB, tasksTable{a.c.TasksTable}, key)
}

func (a *Accountant) expiry() int64 { return a.c.Now().Add(a.c.Retention).Unix() }

// onTable returns in addressed to table.
func onTable(in *dynamodb.UpdateItemInput, table string) *dynamodb.UpdateItemInput {
	in.TableName = &table
	return in
}

// tasksTable names the table items are read from.
type tasksTable struct{ TasksTable string }

func getItem(ctx context.Context, db DB, t tasksTable, key string) (map[string]types.AttributeValue, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.TasksTable), Key: keyOf(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("spend: read %s: %w", key, err)
	}
	return out.Item, nil
}

func decodeState(item map[string]types.AttributeValue) State {
	s := State{Spent: Usage{
		InputTokens:  numOf(item["spent_input_tokens"]),
		OutputTokens: numOf(item["spent_output_tokens"]),
		Cost:         Micros(numOf(item["spent_micros"])),
	}}
	s.ReservedTokens = numOf(item["used_tokens"]) - s.Spent.Tokens()
	s.ReservedCost = Micros(numOf(item["used_micros"])) - s.Spent.Cost
	return s
}

// ambiguous reports whether err leaves a write's outcome unknown (a
// timeout: the server may have performed it).
func ambiguous(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func keyOf(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"task_id": str(key)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func strOf(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return fmt.Sprint(v)
}

func numOf(v types.AttributeValue) int64 {
	if n, ok := v.(*types.AttributeValueMemberN); ok {
		i, _ := strconv.ParseInt(n.Value, 10, 64)
		return i
	}
	return 0
}
