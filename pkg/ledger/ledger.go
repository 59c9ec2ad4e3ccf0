package ledger

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/taskledger/taskledger/internal/calltag"
	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// DynamoDB is the subset of *dynamodb.Client the ledger calls. Wrap the real
// client (or add SDK middleware) to inject faults; do not reimplement it.
type DynamoDB interface {
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Defaults and limits.
const (
	DefaultShards      = 16
	DefaultMaxAttempts = 5
	DefaultMaxAge      = time.Hour
	DefaultRetention   = 7 * 24 * time.Hour
	// DefaultDispatchTimeout is the worker's default lease: a claim keeps due_at, so a task
	// whose worker dies before its first heartbeat is looked at at its dispatch deadline.
	DefaultDispatchTimeout       = 30 * time.Second
	DefaultDispatchBackoffFactor = 8 // × DispatchTimeout: the default DispatchBackoffCap
	// ByStateIndex and OpenReviewsIndex are the GSI names in template.yaml.
	ByStateIndex     = "by_state"
	OpenReviewsIndex = "open_reviews"
	MinIDKeyBytes    = 32 // the shortest Config.IDKey New accepts
)

// LeaseExpiredMessage is the error message ExpireToUnknown records: unlike
// MarkUnknown's, nothing says whether the provider call had started.
const LeaseExpiredMessage = "the worker's lease expired during the attempt; the provider may have acted"

// Config names the tables and sets the policies the ledger enforces.
type Config struct {
	TasksTable  string
	ReviewTable string
	// WatchTable, when set, is where Create records each submission for the
	// reconciler instead of indexing the task (doc.go, "States and retention").
	WatchTable string
	// Shards per state in by_state: fixed for a live table, whose indexed tasks a change
	// strands in shards nobody queries.
	Shards int
	// MaxAttempts and MaxAge are the default budgets of new tasks.
	MaxAttempts int
	MaxAge      time.Duration
	Retention   time.Duration // how long TTL keeps terminal tasks and so their keys (at least MinRetention)
	// DispatchTimeout is the outbox deadline: how long a queued task's SQS message may wait
	// before the reconciler re-sends it (DispatchBackoff doubles it). A claim keeps it as
	// due_at, or renews at once (a second write) when it lies over a lease past the lease's
	// end: keep it near the lease.
	DispatchTimeout    time.Duration
	DispatchBackoffCap time.Duration    // the longest wait between re-sends
	Now                func() time.Time // the clock (default time.Now)
	// IDKey is the server secret task ids are derived with (Ledger.TaskID), so nobody can
	// compute one from an Idempotency-Key: at least MinIDKeyBytes, fixed while tasks are
	// live (or replays get new ids). Empty: the unkeyed package function TaskID (tests, tools).
	IDKey SecretKey
}

// SecretKey is key material that fmt never prints (every verb shows
// "[redacted N bytes]"), so a logged Config leaks nothing.
type SecretKey []byte

// Format implements fmt.Formatter.
func (k SecretKey) Format(f fmt.State, _ rune) { fmt.Fprintf(f, "[redacted %d bytes]", len(k)) }

// Ledger is the task ledger. It is safe for concurrent use.
type Ledger struct {
	db  DynamoDB
	cfg Config
}

// New returns a Ledger over db.
func New(db DynamoDB, cfg Config) (*Ledger, error) {
	if cfg.TasksTable == "" || cfg.ReviewTable == "" {
		return nil, errors.New("ledger: TasksTable and ReviewTable are required")
	}
	orDefault(&cfg.Shards, DefaultShards)
	orDefault(&cfg.MaxAttempts, DefaultMaxAttempts)
	orDefault(&cfg.MaxAge, DefaultMaxAge)
	orDefault(&cfg.Retention, DefaultRetention)
	orDefault(&cfg.DispatchTimeout, DefaultDispatchTimeout)
	orDefault(&cfg.DispatchBackoffCap, DefaultDispatchBackoffFactor*cfg.DispatchTimeout)
	cfg.DispatchBackoffCap = max(cfg.DispatchBackoffCap, cfg.DispatchTimeout)
	if n := len(cfg.IDKey); n > 0 && n < MinIDKeyBytes {
		return nil, fmt.Errorf("ledger: IDKey has %d bytes: at least %d", n, MinIDKeyBytes)
	}
	if cfg.Shards > 100 {
		return nil, fmt.Errorf("ledger: Shards=%d: at most 100", cfg.Shards)
	}
	if cfg.Retention < MinRetention {
		return nil, fmt.Errorf("ledger: Retention=%s: at least %s (MinRetention), so no worker of a task outlives its item", cfg.Retention, MinRetention)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Ledger{db: db, cfg: cfg}, nil
}

// orDefault sets *v to d unless it is positive.
func orDefault[T int | int64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Config returns the effective configuration.
func (l *Ledger) Config() Config { return l.cfg }

// DB returns the client the ledger calls.
func (l *Ledger) DB() DynamoDB { return l.db }

// Now returns the ledger's clock reading.
func (l *Ledger) Now() time.Time { return l.cfg.Now() }

const idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

var idEncoding = base32.NewEncoding(idAlphabet).WithPadding(base32.NoPadding)

// TaskID derives a task id without a key: "t_" + 26 base32 characters of
// SHA-256(scope NUL key) (130 bits). Anyone who knows a scope and key can
// compute it, so only a ledger without Config.IDKey uses it.
func TaskID(scope, idempotencyKey string) string { return (&Ledger{}).TaskID(scope, idempotencyKey) }

// TaskID derives the id of the task (scope, idempotency key) names: as the
// package function, but with HMAC-SHA256 under Config.IDKey when it is set.
func (l *Ledger) TaskID(scope, idempotencyKey string) string {
	m := sha256.New()
	if len(l.cfg.IDKey) > 0 {
		m = hmac.New(sha256.New, l.cfg.IDKey)
	}
	m.Write([]byte(scope + "\x00" + idempotencyKey))
	return "t_" + idEncoding.EncodeToString(m.Sum(nil))[:26]
}

// ValidTaskID reports whether s has the shape TaskID produces.
func ValidTaskID(s string) bool {
	return len(s) == 28 && strings.HasPrefix(s, "t_") && strings.Trim(s[2:], idAlphabet) == ""
}

// StateShard returns the by_state partition value of a task in state s
// (its shard: FNV-1a of the task id).
func (l *Ledger) StateShard(s State, taskID string) string { return ShardKey(s, l.Shard(taskID)) }

// ShardKey formats a by_state partition value of s (PartitionOf) and shard.
func ShardKey(s State, shard int) string { return fmt.Sprintf("%s#%02d", PartitionOf(s), shard) }

func taskKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"task_id": str(id)}
}

// Get reads a task with a strongly consistent read.
func (l *Ledger) Get(ctx context.Context, taskID string) (*Task, error) {
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &l.cfg.TasksTable,
		Key:            taskKey(taskID),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, wrapErr("GetItem task", err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("task %s: %w", taskID, ErrNotFound)
	}
	return decodeTask(out.Item)
}

func decodeTask(item map[string]types.AttributeValue) (*Task, error) {
	var t Task
	if err := attributevalue.UnmarshalMap(item, &t); err != nil {
		return nil, fmt.Errorf("ledger: decode task: %w", err)
	}
	return &t, nil
}

// oldOrRead returns the item a failed condition reported (ALL_OLD) or, where
// the engine omitted it, a consistent read. A nil task means "gone".
func (l *Ledger) oldOrRead(ctx context.Context, taskID string, err error) (*Task, error) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && len(ccf.Item) > 0 {
		return decodeTask(ccf.Item)
	}
	t, gerr := l.Get(calltag.StandIn(ctx), taskID)
	if errors.Is(gerr, ErrNotFound) {
		return nil, nil
	}
	return t, gerr
}

func isConditionFailed(err error) bool {
	return errors.As(err, new(*types.ConditionalCheckFailedException))
}

// IsThrottle reports whether err is an AWS throttling error.
func IsThrottle(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && slices.Contains([]string{"ProvisionedThroughputExceededException", "ThrottlingException",
		"RequestLimitExceeded", "Throttling", "TransactionInProgressException"}, ae.ErrorCode())
}

// wrapErr labels an AWS error (unless labelled) with the operation that got
// it: throttles become *ThrottledError, an item-size ValidationException
// ("Item size [to update] has exceeded ...") *ItemTooLargeError.
func wrapErr(op string, err error) error {
	var ae smithy.APIError
	switch {
	case err == nil, errors.As(err, new(*opError)), errors.As(err, new(*ThrottledError)), errors.As(err, new(*ItemTooLargeError)):
		return err
	case IsThrottle(err):
		return &ThrottledError{Op: op, RetryAfter: time.Second, Err: err}
	case IsValidation(err) && errors.As(err, &ae) && strings.Contains(strings.ToLower(ae.ErrorMessage()), "item size"):
		return &ItemTooLargeError{Op: op, Limit: itemsize.MaxItemBytes, Err: err}
	}
	return &opError{op: op, err: err}
}

type opError struct {
	op  string
	err error
}

func (e *opError) Error() string { return "ledger: " + e.op + ": " + e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// IsValidation reports whether err is a ValidationException: the request
// itself is invalid, so repeating it cannot succeed (never transient).
func IsValidation(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException"
}

// update builds an UpdateItem's expressions, names and values.
type update struct {
	sets, removes, conds []string
	names                map[string]string
	values               map[string]types.AttributeValue
	nonce                string // write_nonce to set (apply: default fresh)
	deadlineMs           int64  // the task's age deadline (WithAgeDeadline), 0: not given
	refused              bool   // AfterRefusal: also from unknown at the caller's version
	result               int    // the bytes of the result it saves (fits); -1: none
	attempt              *Task  // the caller's task (InAttempt), nil: not given
	followUps            map[State][]NewTask
	tx                   []types.TransactWriteItem // other items of its transaction (lapsed.go: the review item's update)
}

// WriteOption adjusts one write of the caller's assignment.
type WriteOption func(*update)

// WithNonce sets nonce (NewNonce) as the write's write_nonce: its repeat after a send
// that failed yet applied then returns the task as written, not a *FencedError.
func WithNonce(nonce string) WriteOption { return func(u *update) { u.nonce = nonce } }

// WithAgeDeadline gives a lease renewal (Renew, MarkCallStarted) the task's
// Task.DeadlineMs, so it rounds due_at up to whole leases (runningDue), not the lease end.
func WithAgeDeadline(deadlineMs int64) WriteOption {
	return func(u *update) { u.deadlineMs = deadlineMs }
}

// AfterRefusal says the provider refused the caller's call in so many words
// (never sent, refused for its input or configuration, throttled): it did
// not act, which settles an expired lease's uncertainty, so ScheduleRetry
// and Fail also accept unknown at the caller's version (rows "_after_refusal").
func AfterRefusal() WriteOption { return func(u *update) { u.refused = true } }

// WithFollowUps has a settling write (Complete and its variants, Fail) create the follow-up
// tasks by names for the state it leaves, in ONE TransactWriteItems with it (doc.go, "Approval
// gates and follow-ups"). Each names the task as ParentTaskID; at most MaxFollowUps.
func WithFollowUps(by map[State][]NewTask) WriteOption { return func(u *update) { u.followUps = by } }

func (u *update) with(opts []WriteOption) *update {
	for _, o := range opts {
		if o != nil {
			o(u)
		}
	}
	return u
}

func newUpdate() *update {
	return &update{names: map[string]string{}, values: map[string]types.AttributeValue{}, result: -1}
}

// n and v register an attribute name or a value and return its placeholder.
func (u *update) n(attr string) string {
	u.names["#"+attr] = attr
	return "#" + attr
}

func (u *update) v(name string, val types.AttributeValue) string {
	u.values[":"+name] = val
	return ":" + name
}

// set sets attr to val, dropping a removal of attr an earlier helper added
// (live's of unknown_since): a write that sets it keeps it.
func (u *update) set(attr string, val types.AttributeValue) { u.setExpr(attr, "%s = %s", val) }

// setIfAbsent sets attr to val unless the item holds it already.
func (u *update) setIfAbsent(attr string, val types.AttributeValue) {
	u.setExpr(attr, "%[1]s = if_not_exists(%[1]s, %[2]s)", val)
}

func (u *update) setExpr(attr, format string, val types.AttributeValue) {
	u.removes = slices.DeleteFunc(u.removes, func(r string) bool { return r == "#"+attr })
	u.sets = append(u.sets, fmt.Sprintf(format, u.n(attr), u.v(attr, val)))
}

func (u *update) remove(attrs ...string) {
	for _, a := range attrs {
		u.removes = append(u.removes, u.n(a))
	}
}

func (u *update) input(table, taskID string) *dynamodb.UpdateItemInput {
	var clauses []string
	for i, c := range [][]string{u.sets, u.removes} {
		if len(c) > 0 {
			clauses = append(clauses, []string{"SET ", "REMOVE "}[i]+strings.Join(c, ", "))
		}
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                           &table,
		Key:                                 taskKey(taskID),
		UpdateExpression:                    aws.String(strings.Join(clauses, " ")),
		ExpressionAttributeNames:            u.names,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if len(u.conds) > 0 {
		in.ConditionExpression = aws.String("(" + strings.Join(u.conds, ") AND (") + ")")
	}
	if len(u.values) > 0 {
		in.ExpressionAttributeValues = u.values
	}
	return in
}

func str(s string) types.AttributeValue     { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue      { return &types.AttributeValueMemberN{Value: fmt.Sprint(n)} }
func strState(s State) types.AttributeValue { return str(string(s)) }

func (u *update) stamp(now time.Time) { u.set("updated_ms", num(now.UnixMilli())) }

// live sets the state and its by_state index attributes.
func (l *Ledger) live(u *update, s State, taskID string, dueAt int64) {
	u.set("state", strState(s))
	u.set("state_shard", str(l.StateShard(s, taskID)))
	u.set("due_at", num(dueAt))
	u.remove("unknown_since") // DeferReadback's: a new state (or uncertainty) starts at dueAt
}

// off sets a state that leaves the index (terminal or parked).
func (l *Ledger) off(u *update, s State, now time.Time) {
	u.set("state", strState(s))
	u.remove("state_shard", "due_at", "lease_owner", "lease_until", "not_before", "unknown_since", "open_unknown_ms")
	if s.Terminal() {
		u.set("expires_at", num(now.Add(l.cfg.Retention).Unix()))
	}
}

// NewNonce returns a fresh write nonce (96 random bits, hex) for WithNonce.
func NewNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// setNonce sets write_nonce once: the caller's (WithNonce), else a fresh one.
func (u *update) setNonce() string {
	if u.nonce == "" {
		u.nonce = NewNonce()
	}
	if _, ok := u.values[":write_nonce"]; !ok {
		u.set("write_nonce", str(u.nonce))
	}
	return u.nonce
}

// apply sends one conditional UpdateItem of the task, setting write_nonce
// (doc.go, "Lost replies"). Errors: the ConditionalCheckFailedException
// when the condition failed for another reason; else as wrapErr labels it.
func (l *Ledger) apply(ctx context.Context, op, taskID string, u *update) (*Task, error) {
	nonce := u.setNonce()
	out, err := l.db.UpdateItem(ctx, u.input(l.cfg.TasksTable, taskID))
	if err == nil {
		return decodeTask(out.Attributes)
	}
	if !isConditionFailed(err) {
		return l.ownWrite(ctx, "UpdateItem "+op, taskID, nonce, err)
	}
	// Decide here only if the engine returned ALL_OLD (not kumo): the read
	// is left to callers that need the item anyway (attempt), so one that
	// only wants "not applied" (clampDue) never pays for it.
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && len(ccf.Item) > 0 {
		if cur, derr := decodeTask(ccf.Item); derr != nil || cur.WriteNonce == nonce {
			return cur, derr // our own write (its reply was lost), or an item that does not decode
		}
	}
	return nil, err
}

// attempt sends u (apply), and when its condition failed reads the task
// (oldOrRead): t is the task as written (also when found carrying u's nonce),
// old the task that refused it (nil: gone), err any other error.
func (l *Ledger) attempt(ctx context.Context, label, taskID string, u *update) (t, old *Task, err error) {
	if t, err = l.apply(ctx, label, taskID, u); !isConditionFailed(err) {
		return t, nil, err
	}
	if old, err = l.oldOrRead(ctx, taskID, err); old != nil && old.WriteNonce == u.nonce {
		return old, nil, nil
	}
	return nil, old, err
}

// ownWrite resolves err, the failure of a write (op) that set nonce: the task as written if the
// write may have applied (MayHaveApplied) and the item carries the nonce, else err labelled by op.
// It reads up to 4 times, 50 ms apart and doubling (jittered): a failed read tells nothing, and
// giving up turns an applied write into an unconfirmed one.
func (l *Ledger) ownWrite(ctx context.Context, op, taskID, nonce string, err error) (*Task, error) {
	for i := 0; i < 4 && MayHaveApplied(err); i++ {
		if i > 0 {
			d := 50 * time.Millisecond << (i - 1)
			select {
			case <-ctx.Done():
				return nil, wrapErr(op, err)
			case <-time.After(d/2 + mrand.N(d/2+1)): // jitter in [d/2, d]
			}
		}
		switch cur, gerr := l.Get(ctx, taskID); {
		case gerr == nil && cur.WriteNonce == nonce:
			return cur, nil
		case gerr == nil || errors.Is(gerr, ErrNotFound):
			return nil, wrapErr(op, err)
		}
	}
	return nil, wrapErr(op, err)
}

// transact sends items, among them an update of the task setting write_nonce = nonce, as one
// TransactWriteItems (op names it in errors). applied: by this call (cur nil) or by an earlier
// send whose reply was lost (cur carries nonce). Refused: cur is the task as read (nil: gone).
func (l *Ledger) transact(ctx context.Context, op, taskID, nonce string, items []types.TransactWriteItem) (applied bool, cur *Task, err error) {
	_, err = l.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	switch {
	case err == nil:
		return true, nil, nil
	case !isTxConditionFailed(err):
		cur, err = l.ownWrite(ctx, "TransactWriteItems "+op, taskID, nonce, err)
		return err == nil, cur, err
	}
	if cur, err = l.Get(ctx, taskID); errors.Is(err, ErrNotFound) {
		return false, nil, nil
	}
	return err == nil && cur.WriteNonce == nonce, cur, err
}

// txWrite sends the task's update u (first) and items in one transact and
// returns the task as written (read back: a transaction returns none) or,
// refused, as the refusal found it (nil: gone). A transaction cancelled by a
// concurrent write of one of its items wrote nothing: *ThrottledError.
func (l *Ledger) txWrite(ctx context.Context, op, taskID string, u *update, items []types.TransactWriteItem) (t *Task, refused bool, err error) {
	nonce := u.setNonce()
	all := append([]types.TransactWriteItem{{Update: txUpdate(&types.Update{TableName: &l.cfg.TasksTable}, u.input(l.cfg.TasksTable, taskID))}}, items...)
	applied, cur, err := l.transact(ctx, op, taskID, nonce, all)
	switch {
	case applied && cur == nil:
		t, err = l.Get(ctx, taskID)
		return t, false, err
	case isTxConflict(err):
		return nil, false, &ThrottledError{Op: "TransactWriteItems " + op, RetryAfter: time.Second, Err: errors.Unwrap(err)}
	}
	return cur, !applied && err == nil, err // applied: our own write, its reply lost
}

// txUpdate fills into (which names its table, so internal/templatetest's
// IAM check can tell which table a function writes) with the UpdateItem in.
func txUpdate(into *types.Update, in *dynamodb.UpdateItemInput) *types.Update {
	into.Key, into.UpdateExpression, into.ConditionExpression = in.Key, in.UpdateExpression, in.ConditionExpression
	into.ExpressionAttributeNames, into.ExpressionAttributeValues = in.ExpressionAttributeNames, in.ExpressionAttributeValues
	return into
}

// MayHaveApplied reports whether a write that returned err may have been
// applied anyway (a timeout, a lost reply, a 5xx): not a throttle, a validation
// or other client fault, or a cancelled transaction, which DynamoDB rejects unapplied.
func MayHaveApplied(err error) bool {
	var ae smithy.APIError
	var hs interface{ HTTPStatusCode() int }
	switch {
	case err == nil, IsThrottle(err), IsValidation(err), errors.As(err, &ae) && ae.ErrorFault() == smithy.FaultClient,
		errors.As(err, &hs) && hs.HTTPStatusCode() >= 400 && hs.HTTPStatusCode() < 500:
		return false
	}
	return !errors.As(err, new(*types.TransactionCanceledException))
}
