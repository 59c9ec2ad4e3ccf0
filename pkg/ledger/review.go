package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const (
	// Review reasons.
	ReviewBudgetExhausted = "budget_exhausted"
	ReviewUnknownOutcome  = "unknown_outcome"
	ReviewProviderConfig  = "provider_config"
	ReviewPoisonMessage   = "poison_message"
	ReviewStaleLease      = "stale_lease"
	ReviewResultTooLarge  = "result_too_large" // the result does not fit DynamoDB's 400 KB item: not saved
	ReviewResultNotSaved  = "result_not_saved" // a readback found it; saving it failed until the age budget ended
	// Review statuses.
	ReviewOpen     = "open"
	ReviewResolved = "resolved"
	// Resolutions recorded on a resolved review item.
	ResolutionRetry     = "retry"
	ResolutionCompleted = "completed"
	ResolutionFailed    = "failed"
	ResolutionCancelled = "cancelled" // a worker ended the parked task (CancelLapsed), not an operator
)

// Review is one item of the dead-letter review table, flat so each attribute is a DynamoDB console column.
type Review struct {
	TaskID         string   `dynamodbav:"task_id" json:"task_id"`
	ReviewStatus   string   `dynamodbav:"review_status" json:"review_status"`
	Reason         string   `dynamodbav:"reason" json:"reason"`
	Summary        string   `dynamodbav:"summary" json:"summary"`
	Known          []string `dynamodbav:"known" json:"known"`
	Uncertain      []string `dynamodbav:"uncertain" json:"uncertain"`
	SafeActions    []string `dynamodbav:"safe_actions" json:"safe_actions"`
	TaskState      string   `dynamodbav:"task_state,omitempty" json:"task_state,omitempty"`
	Attempts       int      `dynamodbav:"attempts" json:"attempts"`
	ErrorClass     string   `dynamodbav:"error_class,omitempty" json:"error_class,omitempty"`
	ErrorMessage   string   `dynamodbav:"error_message,omitempty" json:"error_message,omitempty"`
	ProviderRef    string   `dynamodbav:"provider_ref,omitempty" json:"provider_ref,omitempty"`
	PayloadSHA256  string   `dynamodbav:"payload_sha256,omitempty" json:"payload_sha256,omitempty"`
	CorrelationID  string   `dynamodbav:"correlation_id,omitempty" json:"correlation_id,omitempty"`
	DeadLetteredAt string   `dynamodbav:"dead_lettered_at" json:"dead_lettered_at"`
	ResolvedAt     string   `dynamodbav:"resolved_at,omitempty" json:"resolved_at,omitempty"`
	ResolvedBy     string   `dynamodbav:"resolved_by,omitempty" json:"resolved_by,omitempty"`
	Resolution     string   `dynamodbav:"resolution,omitempty" json:"resolution,omitempty"`
	ResolutionNote string   `dynamodbav:"resolution_note,omitempty" json:"resolution_note,omitempty"`
	// ParkCount counts the task's parks (a park after a retry overwrites the resolved item).
	ParkCount int `dynamodbav:"park_count" json:"park_count"`
	// MessageID and BodySHA256/BodyBytes describe a poison message.
	MessageID  string `dynamodbav:"message_id,omitempty" json:"message_id,omitempty"`
	BodySHA256 string `dynamodbav:"body_sha256,omitempty" json:"body_sha256,omitempty"`
	BodyBytes  int    `dynamodbav:"body_bytes,omitempty" json:"body_bytes,omitempty"`
	ExpiresAt  int64  `dynamodbav:"expires_at,omitempty" json:"expires_at,omitempty"`
}

// ParkMark stands for the park's number in a review's SafeActions: a command ("taskledger
// review retry <id> --park "+ParkMark) copied later from a ticket or alert must decide only the
// park it was read on. The write recording the review, the only one sure of the number,
// replaces it (Park: from the task it is conditioned on; ReviseLapsed*: given; poison: 1).
const ParkMark = "{park}"

// withPark copies actions, ParkMark replaced by n: the caller's review may be written again.
func withPark(actions []string, n int) []string {
	out := slices.Clone(actions)
	for i, a := range out {
		out[i] = strings.ReplaceAll(a, ParkMark, strconv.Itoa(n))
	}
	return out
}

// GetReview reads a review item (consistent). Errors: ErrNotFound.
func (l *Ledger) GetReview(ctx context.Context, taskID string) (*Review, error) {
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.cfg.ReviewTable, Key: taskKey(taskID),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, wrapErr("GetItem review", err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("review %s: %w", taskID, ErrNotFound)
	}
	var r Review
	if err := attributevalue.UnmarshalMap(out.Item, &r); err != nil {
		return nil, fmt.Errorf("ledger: decode review: %w", err)
	}
	return &r, nil
}

// ParkOptions say what the task, as the caller read it, must still be for Park to apply.
type ParkOptions struct {
	State        State
	Version      int64     // doc.go, "Versions"
	LeaseExpired bool      // also require lease_until < now
	DueAt        int64     // when set, also require due_at (row expire_approval)
	FollowUps    []NewTask // in the park's transaction (row follow_up), parent the task; at most MaxFollowUps
}

// Park moves a task to needs_review and writes its review item in ONE TransactWriteItems. The
// caller gives r's explanation, the rest comes from the task; ParkMark becomes this park's
// number (park_count read, plus one). Errors: *ConflictError when the task moved
// (IsAlreadyParked: another actor parked it first), ErrNotFound, *ThrottledError.
func (l *Ledger) Park(ctx context.Context, t *Task, o ParkOptions, r Review) (*Task, error) {
	now := l.cfg.Now().UTC()
	r.TaskState, r.Attempts = string(o.State), t.Attempts
	r.ErrorClass = cmp.Or(r.ErrorClass, t.ErrorClass)
	r.ErrorMessage = truncate(cmp.Or(r.ErrorMessage, t.ErrorMessage), MaxErrorMessage)
	r.ProviderRef = cmp.Or(r.ProviderRef, t.ProviderRef)
	r.PayloadSHA256, r.CorrelationID = t.PayloadSHA256, t.CorrelationID
	r.Resolution, r.ResolvedAt, r.ResolvedBy, r.ResolutionNote, r.ExpiresAt = "", "", "", "", 0
	// Conditioned on t's park_count, which only a park changes: no read of the old review item.
	item, err := r.open(t.TaskID, t.ParkCount+1, now)
	if err != nil {
		return nil, err
	}
	u := newUpdate()
	l.off(u, StateNeedsReview, now)
	u.set("review_reason", str(r.Reason))
	u.set("review_summary", str(r.Summary))
	u.set("park_count", num(int64(r.ParkCount)))
	if r.ErrorClass != "" {
		setError(u, r.ErrorClass, r.ErrorMessage)
	}
	u.stamp(now)
	tr := row(pick(o.LeaseExpired, "park_expired_lease", pick(o.DueAt != 0, "expire_approval", "park")))
	if len(o.FollowUps) > 0 {
		tr = followUpTwin(tr)
	}
	follow, err := l.followUpItems("park", t.TaskID, o.FollowUps, now, nil)
	if err != nil {
		return nil, err
	}
	tr.condition(u, &Call{Now: now, Version: o.Version, State: o.State, DueAt: o.DueAt, Parks: t.ParkCount})
	nonce := u.setNonce()
	applied, cur, err := l.transact(ctx, "park", t.TaskID, nonce, append([]types.TransactWriteItem{
		{Put: &types.Put{TableName: &l.cfg.ReviewTable, Item: item, ConditionExpression: aws.String(gNoOpenReview.Expr),
			ExpressionAttributeNames:  map[string]string{"#id": "task_id", "#rs": "review_status"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":resolved": str(ReviewResolved)}}},
		{Update: txUpdate(&types.Update{TableName: &l.cfg.TasksTable}, u.input(l.cfg.TasksTable, t.TaskID))},
	}, follow...))
	switch {
	case applied && cur == nil:
		return parkedCopy(t, r, now, nonce), nil
	case applied:
		return cur, nil // our own park; its reply was lost
	case err != nil:
		return nil, err
	case cur == nil:
		return nil, &notFound{t.TaskID}
	}
	return nil, conflict("park", t.TaskID, cur)
}

// parkedCopy is t as Park left it: a transaction returns no item, and a read costs a GetItem.
func parkedCopy(t *Task, r Review, now time.Time, nonce string) *Task {
	p := *t
	p.State, p.ReviewReason, p.ReviewSummary, p.ParkCount = StateNeedsReview, r.Reason, r.Summary, r.ParkCount
	if r.ErrorClass != "" {
		p.ErrorClass, p.ErrorMessage = r.ErrorClass, r.ErrorMessage
	}
	p.UpdatedMs, p.WriteNonce = now.UnixMilli(), nonce
	p.UpdatedAt = msString(p.UpdatedMs) // as a read derives it
	p.StateShard, p.DueAt, p.LeaseOwner, p.LeaseUntil, p.NotBefore = "", 0, "", 0, 0
	p.UnknownSinceMs, p.OpenUnknownMs = 0, 0 // off's removals: the review carries the question now
	return &p
}

// IsAlreadyParked reports whether err says another actor parked the task first.
func IsAlreadyParked(err error) bool {
	var ce *ConflictError
	return errors.As(err, &ce) && ce.State == StateNeedsReview
}

// open readies r as the open review item id at park n (withPark) and encodes it.
func (r *Review) open(id string, n int, now time.Time) (map[string]types.AttributeValue, error) {
	r.TaskID, r.ReviewStatus, r.DeadLetteredAt, r.ParkCount = id, ReviewOpen, rfc3339(now), n
	r.SafeActions = withPark(r.SafeActions, n)
	nilToEmpty(r)
	item, err := attributevalue.MarshalMap(r)
	if err != nil {
		return nil, fmt.Errorf("ledger: encode review: %w", err)
	}
	return item, nil
}

// nilToEmpty stores r's absent lists as empty lists, not NULL.
func nilToEmpty(r *Review) {
	for _, list := range []*[]string{&r.Known, &r.Uncertain, &r.SafeActions} {
		if *list == nil {
			*list = []string{}
		}
	}
}

// txReasons returns a cancelled transaction's reason codes; ok=false: err is none.
func txReasons(err error) (codes []string, ok bool) {
	tce, ok := errors.AsType[*types.TransactionCanceledException](err)
	if ok {
		for _, r := range tce.CancellationReasons {
			codes = append(codes, aws.ToString(r.Code))
		}
	}
	return codes, ok
}

func isTxConditionFailed(err error) bool {
	codes, ok := txReasons(err)
	// Some emulators omit the reasons: the caller re-reads.
	return ok && (len(codes) == 0 || slices.Contains(codes, "ConditionalCheckFailed"))
}

// isTxConflict: cancelled only because another request wrote one of its items, no condition failed.
func isTxConflict(err error) bool {
	codes, _ := txReasons(err)
	return slices.Contains(codes, "TransactionConflict") && !slices.Contains(codes, "ConditionalCheckFailed")
}

// PutPoison records a poison message (a body that is not a task reference) as an open review item
// keyed PoisonID at park 1; the same message again is a no-op. r needs MessageID, Summary, body hash, size.
func (l *Ledger) PutPoison(ctx context.Context, r Review) (*Review, error) {
	if r.MessageID == "" {
		return nil, errors.New("ledger: PutPoison needs MessageID")
	}
	r.Reason = ReviewPoisonMessage
	item, err := r.open(PoisonID(r.MessageID), 1, l.cfg.Now().UTC())
	if err != nil {
		return nil, err
	}
	_, err = l.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &l.cfg.ReviewTable, Item: item,
		ConditionExpression: aws.String("attribute_not_exists(#id)"), ExpressionAttributeNames: map[string]string{"#id": "task_id"}})
	if err != nil && !isConditionFailed(err) {
		return nil, wrapErr("PutItem poison", err)
	}
	return &r, nil
}

// PoisonID is the review-table key of a poison message.
func PoisonID(messageID string) string { return "msg_" + messageID }
