package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MinRetention is the shortest Config.Retention the ledger accepts: a task
// re-created under a TTL-deleted item's id starts again at version 0, so no
// worker of the old task may still run (a Lambda runs at most 15 minutes).
const MinRetention = time.Hour

// NewTask describes a submission; fields named as Task's are recorded as they are. Input
// must be validated and canonical; PayloadSHA256 is the hash the caller computed over it and
// whatever else identifies the request (kind, parent, the documents' SHA-256s).
type NewTask struct {
	Scope          string
	IdempotencyKey string
	Kind           string
	Input          string
	InputRef       *PayloadRef   // an input in S3 (Input empty), written before Create
	Documents      []DocumentRef // their objects written before Create
	PayloadSHA256  string
	ParentTaskID   string
	InputInherited *bool  // a regenerate's only
	CorrelationID  string // "": the task id
	// MaxAttempts and MaxAge override the ledger defaults when > 0.
	MaxAttempts     int
	MaxAge          time.Duration
	BudgetMaxTokens int64
	BudgetMaxMicros int64
	ChainRoot       string
	ChainEpochMs    int64
	// Plan is the canonical JSON of the submitted approval and deliver plan
	// ("": none); ApprovalTTL > 0 (at most MaxApprovalTTL) gives a gate.
	Plan        string
	ApprovalTTL time.Duration
	// DecidedBy, DecidedAt and ApprovalPolicy: who approved a deliver task, when, under which policy.
	DecidedBy, DecidedAt, ApprovalPolicy string
	// Provenance: Approve sets the approval's on its deliveries, whatever the request said.
	Provenance     *Provenance
	RequesterEmail string
	ConversationID string // the caller's conversation (conversation.go): 1-128 of [A-Za-z0-9_-], or ""
}

// Create records a new queued task with one conditional PutItem, due for dispatch at
// now + DispatchTimeout: if the caller's SQS send is lost, the reconciler re-sends it then.
// With a watch table (watch.go) the watch item is put first and the task is not indexed
// (the reconciler passes over a watch item whose task's put failed).
// Errors: *DuplicateError (a replay), *PayloadMismatchError, *ThrottledError.
func (l *Ledger) Create(ctx context.Context, n NewTask) (*Task, error) {
	now := l.cfg.Now().UTC()
	t, item, err := l.newTaskItem(n, now)
	if err != nil {
		return nil, err
	}
	if l.watched() {
		// Both puts must be over when the reconciler may read the watch item (due_at), or it
		// would pass over a task put later as never put: half the way there, at the latest.
		half := time.Duration(t.DueAt-now.UnixMilli()) * time.Millisecond / 2
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, half)
		defer cancel()
		t.StateShard = ""
		delete(item, "state_shard")
		if err := l.putWatch(ctx, t); err != nil {
			return nil, err
		}
		if l.cfg.Now().After(now.Add(half)) {
			err := errors.New("the watch item's put took half the time to its due time: the task is not put")
			return nil, &ThrottledError{Op: "PutItem watch", RetryAfter: time.Second, Err: err}
		}
	}
	// An item past its retention is absent (doc.go, "States and retention"): replaced if it is
	// exactly the one read. Three tries: a put is repeated only when the conflicting item
	// turned out expired or gone, or changed between the failed put and the read.
	var expired *Task
	for try := 0; try < 3; try++ {
		in := &dynamodb.PutItemInput{
			TableName:                           &l.cfg.TasksTable,
			Item:                                item,
			ConditionExpression:                 aws.String("attribute_not_exists(#id)"),
			ExpressionAttributeNames:            map[string]string{"#id": "task_id"},
			ReturnValuesOnConditionCheckFailure: "ALL_OLD",
		}
		if expired != nil {
			t.AssignmentVersion = expired.AssignmentVersion
			item["assignment_version"] = num(t.AssignmentVersion) // in.Item: the same map
			in.ConditionExpression = aws.String("#exp = :old_exp AND #exp < :now_s AND #ver = :old_ver")
			in.ExpressionAttributeNames = map[string]string{"#exp": "expires_at", "#ver": "assignment_version"}
			in.ExpressionAttributeValues = map[string]types.AttributeValue{
				":old_exp": num(expired.ExpiresAt),
				":now_s":   num(now.Unix()),
				":old_ver": num(expired.AssignmentVersion),
			}
		}
		switch _, err = l.db.PutItem(ctx, in); {
		case err == nil:
			return t, nil
		case !isConditionFailed(err):
			return nil, wrapErr("PutItem task", err)
		}
		old, rerr := l.oldOrRead(ctx, t.TaskID, err)
		if rerr != nil {
			return nil, rerr
		}
		switch {
		case old == nil:
			expired = nil // swept in between: put as new
		case old.CreateNonce == t.CreateNonce:
			return old, nil // our own put; its reply was lost
		case old.PastRetention(now):
			expired = old // replace it, keeping its fencing token
		case old.PayloadSHA256 != n.PayloadSHA256:
			l.dropWatch(ctx, t)
			return nil, &PayloadMismatchError{TaskID: old.TaskID, ExistingSHA256: old.PayloadSHA256, NewSHA256: n.PayloadSHA256}
		default:
			// A replay keeps the watch item of a task live, unindexed and a dispatch timeout past due: its
			// put may have landed after the reconciler read the item and its recheck, a dispatch timeout later.
			if old.StateShard != "" || !old.State.Live() || now.Before(time.UnixMilli(old.DueAt).Add(l.cfg.DispatchTimeout)) {
				l.dropWatch(ctx, t)
			}
			return nil, &DuplicateError{Task: old}
		}
	}
	return nil, fmt.Errorf("ledger: create task %s: conflicting item kept disappearing", t.TaskID)
}

// newTaskItem builds the queued task n describes and its item, as Create
// puts it (and Approve, for the deliver tasks it creates).
func (l *Ledger) newTaskItem(n NewTask, now time.Time) (*Task, map[string]types.AttributeValue, error) {
	if n.Scope == "" || n.IdempotencyKey == "" || n.Kind == "" || n.PayloadSHA256 == "" {
		return nil, nil, errors.New("ledger: a new task needs Scope, IdempotencyKey, Kind and PayloadSHA256")
	}
	if n.ApprovalTTL > MaxApprovalTTL {
		return nil, nil, fmt.Errorf("ledger: ApprovalTTL %s: at most %s (MaxApprovalTTL)", n.ApprovalTTL, MaxApprovalTTL)
	}
	id, ms := l.TaskID(n.Scope, n.IdempotencyKey), now.UnixMilli()
	t := &Task{
		TaskID:          id,
		State:           StateQueued,
		Scope:           n.Scope,
		IdempotencyKey:  n.IdempotencyKey,
		PayloadSHA256:   n.PayloadSHA256,
		Input:           n.Input,
		InputRef:        n.InputRef,
		Documents:       n.Documents,
		Kind:            n.Kind,
		ParentTaskID:    n.ParentTaskID,
		InputInherited:  n.InputInherited,
		CorrelationID:   cmp.Or(n.CorrelationID, id),
		MaxAttempts:     n.MaxAttempts,
		BudgetMaxTokens: n.BudgetMaxTokens,
		BudgetMaxMicros: n.BudgetMaxMicros,
		ChainRoot:       n.ChainRoot,
		ChainEpochMs:    n.ChainEpochMs,
		CreatedAt:       msString(ms),
		CreatedMs:       ms,
		UpdatedAt:       msString(ms),
		UpdatedMs:       ms,
		BudgetStartMs:   ms,
		MaxAgeMs:        n.MaxAge.Milliseconds(),
		CreateNonce:     NewNonce(),
		StateShard:      l.StateShard(StateQueued, id),
		Provenance:      n.Provenance,
		RequesterEmail:  n.RequesterEmail,
		Approval: Approval{Plan: n.Plan, ApprovalRequired: n.ApprovalTTL > 0, ApprovalTTLSeconds: int64(max(n.ApprovalTTL, 0) / time.Second),
			DecidedBy: n.DecidedBy, DecidedAt: n.DecidedAt, ApprovalPolicy: n.ApprovalPolicy},
	}
	orDefault(&t.MaxAttempts, l.cfg.MaxAttempts)
	orDefault(&t.MaxAgeMs, l.cfg.MaxAge.Milliseconds())
	t.DeadlineMs = t.BudgetStartMs + t.MaxAgeMs
	// Due at the outbox deadline, or the age deadline if sooner, so the reconciler parks it in time.
	t.DueAt = min(now.Add(l.cfg.DispatchTimeout).UnixMilli(), t.DeadlineMs)
	var err error
	if t.Conversation, err = conversationOf(n); err != nil {
		return nil, nil, err
	}
	item, err := attributevalue.MarshalMap(t)
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: encode task: %w", err)
	}
	return t, item, nil
}
