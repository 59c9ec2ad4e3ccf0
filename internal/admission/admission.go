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
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// KeyPrefix starts every admission window key in the tasks table.
const KeyPrefix = "adm#"

// DefaultWindow is the admission window: provider limits are per minute.
const DefaultWindow = time.Minute

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
type Admitter struct{ c Config }

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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.Nonce == nil {
		cfg.Nonce = randomNonce
	}
	return &Admitter{c: cfg}, nil
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
	EstimatedTokens int64
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

// Admit reserves one request and estimatedTokens in model's current window.
// It returns a Ticket when the call may be made now, or:
//   - *NotAdmittedError: the window is full; retry at RetryAt (this must not
//     consume an attempt);
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
		start := a.windowOf(a.c.Now())
		key := WindowKey(model, start)
		end := start.Add(a.c.Window)
		retry := ambiguous == key
		_, err := a.c.DB.UpdateItem(ctx, a.admitInput(a.c.TasksTable, key, end, lim, estimatedTokens, nonce, retry))
		if err == nil {
			return &Ticket{Model: model, WindowStart: start, Key: key, EstimatedTokens: estimatedTokens, Writes: attempt}, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if retry {
				item, rerr := a.oldOrRead(ctx, key, ccf)
				if rerr != nil {
					return nil, fmt.Errorf("admission: read back window %s after a lost reply: %w", key, rerr)
				}
				if s, ok := item["last_nonce"].(*types.AttributeValueMemberS); ok && s.Value == nonce {
					// Our earlier write landed and nobody wrote since.
					return &Ticket{Model: model, WindowStart: start, Key: key, EstimatedTokens: estimatedTokens, Writes: attempt}, nil
				}
			}
			return nil, &NotAdmittedError{Model: model, RetryAt: end}
		}
		if !Ambiguous(err) || ctx.Err() != nil {
			return nil, fmt.Errorf("admission: admit %s: %w", key, err)
		}
		ambiguous, lastErr = key, err
	}
	return nil, fmt.Errorf("admission: admit %s: outcome unknown after %d writes: %w", model, a.c.MaxAttempts, lastErr)
}

func (a *Admitter) admitInput(table, key string, end time.Time, lim Limit, est int64, nonce string, retry bool) *dynamodb.UpdateItemInput {
	cond := "attribute_not_exists(#r) OR (#r < :rpm AND #t <= :room)"
	if retry {
		cond = "#n <> :nonce AND (" + cond + ")"
	}
	in := &dynamodb.UpdateItemInput{
		TableName:           &table,
		Key:                 map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:    aws.String("ADD #r :one, #t :est SET #e = if_not_exists(#e, :exp), #n = :nonce"),
		ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: map[string]string{
			"#r": "requests", "#t": "tokens", "#e": "expires_at", "#n": "last_nonce",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one":   num(1),
			":est":   num(est),
			":exp":   num(end.Add(ttlAfterWindow).Unix()),
			":nonce": &types.AttributeValueMemberS{Value: nonce},
			":rpm":   num(lim.RequestsPerWindow),
			":room":  num(lim.TokensPerWindow - est),
		},
	}
	if retry {
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return in
}

func (a *Admitter) oldOrRead(ctx context.Context, key string, ccf *types.ConditionalCheckFailedException) (map[string]types.AttributeValue, error) {
	if len(ccf.Item) > 0 {
		return ccf.Item, nil
	}
	out, err := a.c.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &a.c.TasksTable, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: key}},
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
	_, err := a.c.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &a.c.TasksTable,
		Key:                       map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: t.Key}},
		UpdateExpression:          aws.String("ADD #t :d"),
		ConditionExpression:       aws.String("attribute_exists(#t)"),
		ExpressionAttributeNames:  map[string]string{"#t": "tokens"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":d": num(diff)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admission: settle %s: %w", t.Key, err)
	}
	return nil
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
		Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: key}},
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
