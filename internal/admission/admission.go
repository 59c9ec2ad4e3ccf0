package admission

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// KeyPrefix starts every admission window key in the tasks table.
const KeyPrefix = "adm#"

// DefaultWindow is the admission window: provider limits are per minute.
const DefaultWindow = time.Minute

// DefaultSlots is the number of slots per window (5 s slots of a minute).
const DefaultSlots = 12

// ttlAfterWindow is how long a window item outlives its window (TTL).
const ttlAfterWindow = time.Hour

// Limit is a model's provider limit per window.
type Limit struct {
	// RequestsPerWindow and TokensPerWindow must both be positive.
	RequestsPerWindow int64
	TokensPerWindow   int64
}

// DB is the part of the DynamoDB client the Admitter uses.
type DB interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Config configures an Admitter.
type Config struct {
	DB DB
	// TasksTable is the tasks table (named like the template's logical id,
	// so internal/templatetest can tell which table the writes address).
	TasksTable string
	// Limits per model id (as sent to the provider).
	Limits map[string]Limit
	// Window defaults to DefaultWindow.
	Window time.Duration
	// Slots cuts each window into this many slots (default DefaultSlots):
	// an admit counts, besides its own window, the previous window's slots
	// from its own slot on, so no span of one window's length ever holds
	// more than the limit (see the package documentation).
	Slots int
	// Now defaults to time.Now.
	Now func() time.Time
	// MaxAttempts bounds the writes of one Admit when replies are lost
	// (default 3).
	MaxAttempts int
	// Nonce returns a fresh nonce per Admit (default: 16 random bytes, hex).
	Nonce func() string
}

// Admitter admits provider calls against shared per-model limits. Safe for
// concurrent use.
type Admitter struct {
	c Config
	// sealed caches, per model, the sealed counts of the window before the
	// current one (final once sealed, so valid for the whole window).
	mu     sync.Mutex
	sealed map[string]prevWindow
}

// prevWindow is a sealed window's per-slot counts.
type prevWindow struct {
	start            time.Time
	requests, tokens []int64
}

// tail returns the counts of p's slots from slot on.
func (p prevWindow) tail(slot int) (requests, tokens int64) {
	for i := slot; i < len(p.requests); i++ {
		requests += p.requests[i]
		tokens += p.tokens[i]
	}
	return requests, tokens
}

// New validates cfg and returns an Admitter.
func New(cfg Config) (*Admitter, error) {
	if cfg.DB == nil || cfg.TasksTable == "" {
		return nil, errors.New("admission: DB and TasksTable are required")
	}
	for m, l := range cfg.Limits {
		if err := validModel(m); err != nil {
			return nil, err
		}
		if l.RequestsPerWindow <= 0 || l.TokensPerWindow <= 0 {
			return nil, fmt.Errorf("admission: model %q: requests and tokens per window must be positive (got %d, %d)", m, l.RequestsPerWindow, l.TokensPerWindow)
		}
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Window%time.Second != 0 {
		return nil, fmt.Errorf("admission: window %s is not a whole number of seconds", cfg.Window)
	}
	if cfg.Slots <= 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Slots > 60 || cfg.Window%(time.Duration(cfg.Slots)*time.Millisecond) != 0 {
		return nil, fmt.Errorf("admission: %d slots must be 1..60 and divide the window %s into whole milliseconds", cfg.Slots, cfg.Window)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.Nonce == nil {
		cfg.Nonce = randomNonce
	}
	return &Admitter{c: cfg, sealed: map[string]prevWindow{}}, nil
}

func validModel(m string) error {
	if m == "" || len(m) > 256 {
		return fmt.Errorf("admission: model id must be 1..256 bytes (got %d)", len(m))
	}
	return nil
}

func randomNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Ticket is an admitted call's reservation, for Settle.
type Ticket struct {
	Model           string
	WindowStart     time.Time
	Key             string
	Slot            int
	EstimatedTokens int64
	// ValidUntil is the end of the ticket's slot: the call is counted in
	// that slot, so it must start before then (a call sent later could
	// meet a call admitted a minute after its slot within 60 s at the
	// provider). A caller past it admits again.
	ValidUntil time.Time
	// Writes is the number of UpdateItem calls Admit made (1 unless a reply
	// was lost).
	Writes int
}

// WindowKey returns the tasks-table key of model's window starting at start.
func WindowKey(model string, start time.Time) string {
	return KeyPrefix + model + "#" + strconv.FormatInt(start.Unix(), 10)
}

// IsWindowKey reports whether a tasks-table key is an admission window.
func IsWindowKey(key string) bool { return strings.HasPrefix(key, KeyPrefix) }

func (a *Admitter) windowOf(t time.Time) time.Time {
	w := int64(a.c.Window / time.Second)
	s := t.Unix()
	return time.Unix(s-((s%w)+w)%w, 0).UTC()
}

// slotLen is the length of one slot.
func (a *Admitter) slotLen() time.Duration { return a.c.Window / time.Duration(a.c.Slots) }

// slotOf returns t's slot in the window starting at start.
func (a *Admitter) slotOf(start, t time.Time) int {
	j := int(t.Sub(start) / a.slotLen())
	return min(max(j, 0), a.c.Slots-1)
}

// retryAt is the earliest slot start after now at which a call of est
// tokens could fit, given the sealed previous window and cur, the current
// window's counts (per slot); in the next window, the current one becomes
// the previous. Two windows away from now, nothing admitted so far counts.
func (a *Admitter) retryAt(lim Limit, prev prevWindow, start, now time.Time, cur prevWindow, est int64) time.Time {
	fits := func(r, k int64) bool { return r < lim.RequestsPerWindow && k+est <= lim.TokensPerWindow }
	curR, curK := cur.tail(0)
	for s := a.slotOf(start, now) + 1; s < a.c.Slots; s++ {
		pr, pk := prev.tail(s)
		if fits(curR+pr, curK+pk) {
			return start.Add(time.Duration(s) * a.slotLen())
		}
	}
	next := start.Add(a.c.Window)
	for s := range a.c.Slots {
		if fits(cur.tail(s)) {
			return next.Add(time.Duration(s) * a.slotLen())
		}
	}
	return next.Add(a.c.Window)
}

// counts reads a window item's per-slot counts.
func (a *Admitter) counts(start time.Time, item map[string]types.AttributeValue) prevWindow {
	p := prevWindow{start: start, requests: make([]int64, a.c.Slots), tokens: make([]int64, a.c.Slots)}
	for i := range a.c.Slots {
		p.requests[i] = numOf(item[slotAttr("r", i)])
		p.tokens[i] = numOf(item[slotAttr("k", i)])
	}
	return p
}

// Admit reserves one request and estimatedTokens in model's current window.
// It returns a Ticket when the call may be made now, or:
//   - *NotAdmittedError: no room in the last 60 s; retry at RetryAt, the
//     earliest slot at which the call fits (this must not consume an
//     attempt);
//   - *UnknownModelError, *EstimateTooLargeError: configuration problems;
//   - any other error: DynamoDB failed; the call must not be made.
func (a *Admitter) Admit(ctx context.Context, model string, estimatedTokens int64) (*Ticket, error) {
	lim, ok := a.c.Limits[model]
	if !ok {
		return nil, &UnknownModelError{Model: model}
	}
	if estimatedTokens < 0 {
		return nil, fmt.Errorf("admission: negative token estimate %d", estimatedTokens)
	}
	if estimatedTokens > lim.TokensPerWindow {
		return nil, &EstimateTooLargeError{Model: model, Estimated: estimatedTokens, Limit: lim.TokensPerWindow}
	}
	nonce := a.c.Nonce()
	var lastErr error
	ambiguous := "" // key of the window a lost reply may have counted in
	for attempt := 1; attempt <= a.c.MaxAttempts; attempt++ {
		now := a.c.Now()
		start := a.windowOf(now)
		key := WindowKey(model, start)
		slot := a.slotOf(start, now)
		prev, err := a.previous(ctx, model, start)
		if err != nil {
			return nil, err
		}
		pr, pt := prev.tail(slot)
		retry := ambiguous == key
		if !retry && (pr >= lim.RequestsPerWindow || pt+estimatedTokens > lim.TokensPerWindow) {
			// The previous window's calls still inside the last window's
			// length leave no room: refused without a write.
			return nil, &NotAdmittedError{Model: model, RetryAt: a.retryAt(lim, prev, start, now, a.counts(start, nil), estimatedTokens)}
		}
		eff := Limit{RequestsPerWindow: lim.RequestsPerWindow - pr, TokensPerWindow: lim.TokensPerWindow - pt}
		_, err = a.c.DB.UpdateItem(ctx, a.admitInput(a.c.TasksTable, key, slot, start.Add(a.c.Window), eff, estimatedTokens, nonce, retry))
		if err == nil {
			return &Ticket{Model: model, WindowStart: start, Key: key, Slot: slot, EstimatedTokens: estimatedTokens, Writes: attempt,
				ValidUntil: start.Add(time.Duration(slot+1) * a.slotLen())}, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			item := ccf.Item
			if retry {
				var rerr error
				if item, rerr = a.oldOrRead(ctx, key, ccf); rerr != nil {
					return nil, fmt.Errorf("admission: read back window %s after a lost reply: %w", key, rerr)
				}
				if s, ok := item["last_nonce"].(*types.AttributeValueMemberS); ok && s.Value == nonce {
					// Our earlier write landed and nobody wrote since. It
					// counted the call in the slot it was sent in
					// (last_slot), which may be before this retry's:
					// Release and Settle must correct that slot, and the
					// call must start before it ends.
					landed := slot
					if n, ok := item["last_slot"].(*types.AttributeValueMemberN); ok {
						if v, err := strconv.Atoi(n.Value); err == nil && v >= 0 && v < a.c.Slots {
							landed = v
						}
					}
					return &Ticket{Model: model, WindowStart: start, Key: key, Slot: landed, EstimatedTokens: estimatedTokens, Writes: attempt,
						ValidUntil: start.Add(time.Duration(landed+1) * a.slotLen())}, nil
				}
			}
			if len(item) == 0 {
				// The engine returned no item (kumo): without the counts,
				// the next window is the safe answer (no read spent on it).
				return nil, &NotAdmittedError{Model: model, RetryAt: start.Add(a.c.Window)}
			}
			return nil, &NotAdmittedError{Model: model, RetryAt: a.retryAt(lim, prev, start, now, a.counts(start, item), estimatedTokens)}
		}
		if !Ambiguous(err) || ctx.Err() != nil {
			return nil, fmt.Errorf("admission: admit %s: %w", key, err)
		}
		ambiguous, lastErr = key, err
	}
	return nil, fmt.Errorf("admission: admit %s: outcome unknown after %d writes: %w", model, a.c.MaxAttempts, lastErr)
}

// previous returns the sealed counts of the window before the one starting
// at start. The first Admit of a model in a window seals the previous one
// (one UpdateItem SET sealed, returning the item): no admit can count in it
// afterwards (every admit is conditioned on attribute_not_exists(sealed)),
// so its counts are final and cached until the window rolls. The seal is
// idempotent and repeated on an ambiguous reply.
func (a *Admitter) previous(ctx context.Context, model string, start time.Time) (prevWindow, error) {
	ps := start.Add(-a.c.Window)
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.sealed[model]; ok && p.start.Equal(ps) {
		return p, nil
	}
	key := WindowKey(model, ps)
	var out *dynamodb.UpdateItemOutput
	var err error
	for range a.c.MaxAttempts {
		out, err = a.c.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &a.c.TasksTable,
			Key:                       itemKey(key),
			UpdateExpression:          aws.String("SET #s = :true, #e = if_not_exists(#e, :exp)"),
			ExpressionAttributeNames:  map[string]string{"#s": "sealed", "#e": "expires_at"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":true": &types.AttributeValueMemberBOOL{Value: true}, ":exp": num(start.Add(ttlAfterWindow).Unix())},
			ReturnValues:              types.ReturnValueAllNew,
		})
		if err == nil || !Ambiguous(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return prevWindow{}, fmt.Errorf("admission: seal the previous window %s: %w", key, err)
	}
	attrs := out.Attributes
	if len(attrs) == 0 { // an engine that returns nothing: the seal holds, so a read is final
		g, err := a.c.DB.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: &a.c.TasksTable, ConsistentRead: aws.Bool(true),
			Key: itemKey(key),
		})
		if err != nil {
			return prevWindow{}, fmt.Errorf("admission: read the sealed window %s: %w", key, err)
		}
		attrs = g.Item
	}
	p := a.counts(ps, attrs)
	a.sealed[model] = p
	return p, nil
}

func slotAttr(prefix string, slot int) string { return prefix + strconv.Itoa(slot) }

func (a *Admitter) admitInput(table, key string, slot int, end time.Time, lim Limit, est int64, nonce string, retry bool) *dynamodb.UpdateItemInput {
	cond := "attribute_not_exists(#seal) AND (attribute_not_exists(#req) OR (#req < :rpm AND #tok <= :room))"
	if retry {
		cond = "#non <> :nonce AND " + cond
	}
	return &dynamodb.UpdateItemInput{
		TableName:           &table,
		Key:                 itemKey(key),
		UpdateExpression:    aws.String("ADD #req :one, #tok :est, #slotr :one, #slott :est SET #exp = if_not_exists(#exp, :exp), #non = :nonce, #lsl = :slot"),
		ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: map[string]string{
			// No placeholder is a prefix of another: kumo substitutes
			// them as text ("#s" would turn "#sr" into "sealedr").
			"#req": "requests", "#tok": "tokens", "#exp": "expires_at", "#non": "last_nonce", "#lsl": "last_slot", "#seal": "sealed",
			"#slotr": slotAttr("r", slot), "#slott": slotAttr("k", slot),
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one":   num(1),
			":est":   num(est),
			":exp":   num(end.Add(ttlAfterWindow).Unix()),
			":nonce": &types.AttributeValueMemberS{Value: nonce},
			":slot":  num(int64(slot)),
			":rpm":   num(lim.RequestsPerWindow),
			":room":  num(lim.TokensPerWindow - est),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

func (a *Admitter) oldOrRead(ctx context.Context, key string, ccf *types.ConditionalCheckFailedException) (map[string]types.AttributeValue, error) {
	if len(ccf.Item) > 0 {
		return ccf.Item, nil
	}
	out, err := a.c.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &a.c.TasksTable, ConsistentRead: aws.Bool(true),
		Key: itemKey(key),
	})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// Settle corrects the ticket's window by actualTokens - EstimatedTokens.
// It makes no call when they are equal and is not retried (see the package
// documentation for the bound). A window item that has already expired is
// left alone (nil error).
func (a *Admitter) Settle(ctx context.Context, t *Ticket, actualTokens int64) error {
	if actualTokens < 0 {
		return fmt.Errorf("admission: negative token usage %d", actualTokens)
	}
	diff := actualTokens - t.EstimatedTokens
	if diff == 0 {
		return nil
	}
	return a.adjust(ctx, "settle", t, "ADD #tok :d, #slott :d", "attribute_exists(#tok)",
		map[string]string{"#tok": "tokens", "#slott": slotAttr("k", t.Slot)},
		map[string]types.AttributeValue{":d": num(diff)})
}

// Release gives back a ticket whose call was never made: its request and
// its estimated tokens leave the window (and its slot). One UpdateItem,
// not retried (a repeat after a lost reply could give back twice, below
// what was really sent: a lost Release keeps the count, the safe side);
// a window that has expired is left alone.
func (a *Admitter) Release(ctx context.Context, t *Ticket) error {
	return a.adjust(ctx, "release", t, "ADD #req :minus, #tok :back, #slotr :minus, #slott :back", "#req >= :one",
		map[string]string{"#req": "requests", "#tok": "tokens", "#slotr": slotAttr("r", t.Slot), "#slott": slotAttr("k", t.Slot)},
		map[string]types.AttributeValue{":minus": num(-1), ":back": num(-t.EstimatedTokens), ":one": num(1)})
}

// adjust corrects the ticket's window by one conditional UpdateItem, not
// retried (ADD is not idempotent). A refused condition — the window has
// expired, or there is nothing to give back — leaves it alone (nil).
func (a *Admitter) adjust(ctx context.Context, op string, t *Ticket, update, cond string, names map[string]string, values map[string]types.AttributeValue) error {
	_, err := a.c.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &a.c.TasksTable,
		Key:                       itemKey(t.Key),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("admission: %s %s: %w", op, t.Key, err)
	}
	return nil
}

// itemKey is the tasks-table key of a window item.
func itemKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: key}}
}

// Window is a model window's counts, for operators, tests and the bench.
type Window struct {
	Requests, Tokens int64
}

// Read returns the counts of model's window containing t (consistent read;
// zero when the window has no item).
func (a *Admitter) Read(ctx context.Context, model string, t time.Time) (Window, error) {
	key := WindowKey(model, a.windowOf(t))
	out, err := a.c.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &a.c.TasksTable, ConsistentRead: aws.Bool(true),
		Key: itemKey(key),
	})
	if err != nil {
		return Window{}, fmt.Errorf("admission: read %s: %w", key, err)
	}
	return Window{Requests: numOf(out.Item["requests"]), Tokens: numOf(out.Item["tokens"])}, nil
}

// Ambiguous reports whether err leaves a write's outcome unknown: a timeout
// (the server may have performed it), as opposed to a rejection.
func Ambiguous(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func numOf(v types.AttributeValue) int64 {
	if n, ok := v.(*types.AttributeValueMemberN); ok {
		i, _ := strconv.ParseInt(n.Value, 10, 64)
		return i
	}
	return 0
}
