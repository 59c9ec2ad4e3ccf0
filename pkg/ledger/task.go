package ledger

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// State is a task's lifecycle state.
type State string

// Task states (DESIGN §3).
const (
	StateQueued      State = "queued"
	StateRunning     State = "running"
	StateRetryWait   State = "retry_wait"
	StateUnknown     State = "unknown"
	StateCompleted   State = "completed"
	StateFailed      State = "failed"
	StateCancelled   State = "cancelled"
	StateNeedsReview State = "needs_review"
	// StateAwaitingApproval: the result is saved (fenced like a completion)
	// and waits for a person's decision until due_at (DESIGN §10). Live.
	StateAwaitingApproval State = "awaiting_approval"
	StateRejected         State = "rejected" // by a person: terminal, no delivery
)

// LiveStates are indexed in by_state and watched by the reconciler.
var LiveStates = []State{StateQueued, StateRunning, StateRetryWait, StateUnknown, StateAwaitingApproval}

// StateActive is no task's state but the by_state partition queued and
// running tasks share (doc.go, "States and retention"). ShardKey and
// internal/tasklist's LiveQuery and CountLive take it or either state.
const StateActive State = "active"

// Partitions are the by_state partition families (the PartitionOf values)
// the reconciler walks and the overview counts.
var Partitions = []State{StateActive, StateRetryWait, StateUnknown, StateAwaitingApproval}

// PartitionOf returns the by_state partition family of a live state:
// StateActive for queued and running (and for StateActive), else s.
func PartitionOf(s State) State {
	if s == StateQueued || s == StateRunning {
		return StateActive
	}
	return s
}

// Terminal reports whether no further transition happens without a person.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled || s == StateRejected
}

// Live reports whether the task is indexed for the reconciler.
func (s State) Live() bool { return slices.Contains(LiveStates, s) }

// Valid reports whether s is one of the known states.
func (s State) Valid() bool { return s.Live() || s.Terminal() || s == StateNeedsReview }

// Task is one item of the tasks table.
type Task struct {
	TaskID         string `dynamodbav:"task_id"`
	State          State  `dynamodbav:"state"`
	Scope          string `dynamodbav:"scope"`
	IdempotencyKey string `dynamodbav:"idempotency_key"`
	PayloadSHA256  string `dynamodbav:"payload_sha256"`
	Input          string `dynamodbav:"input"`
	Kind           string `dynamodbav:"kind"`
	ParentTaskID   string `dynamodbav:"parent_task_id,omitempty"`
	// InputInherited: a regenerate's request named no input (took its parent's), so a
	// retry is recognised once the parent is deleted; nil on other tasks and older regenerates.
	InputInherited    *bool  `dynamodbav:"input_inherited,omitempty"`
	CorrelationID     string `dynamodbav:"correlation_id,omitempty"`
	Attempts          int    `dynamodbav:"attempts"`
	MaxAttempts       int    `dynamodbav:"max_attempts"`
	AssignmentVersion int64  `dynamodbav:"assignment_version"`
	LeaseOwner        string `dynamodbav:"lease_owner,omitempty"`
	LeaseUntil        int64  `dynamodbav:"lease_until,omitempty"` // epoch ms
	NotBefore         int64  `dynamodbav:"not_before,omitempty"`  // epoch ms
	// CreatedAt, UpdatedAt and CompletedAt (RFC 3339 UTC) are derived from the _ms attributes:
	// stored, they would take a small completed task over 1 KB, a write unit more per write.
	CreatedAt     string `dynamodbav:"-"`
	CreatedMs     int64  `dynamodbav:"created_ms"`
	UpdatedAt     string `dynamodbav:"-"`
	UpdatedMs     int64  `dynamodbav:"updated_ms"`
	BudgetStartMs int64  `dynamodbav:"budget_start_ms"` // creation, or an operator's retry with a fresh budget
	MaxAgeMs      int64  `dynamodbav:"max_age_ms"`
	DeadlineMs    int64  `dynamodbav:"deadline_ms"`      // BudgetStartMs + MaxAgeMs, for conditions to compare
	Result        string `dynamodbav:"result,omitempty"` // JSON
	ErrorClass    string `dynamodbav:"error_class,omitempty"`
	ErrorMessage  string `dynamodbav:"error_message,omitempty"`
	Provider      string `dynamodbav:"provider,omitempty"`
	ProviderRef   string `dynamodbav:"provider_ref,omitempty"`
	ReadbackAt    string `dynamodbav:"readback_at,omitempty"`
	CompletedAt   string `dynamodbav:"-"`
	CompletedMs   int64  `dynamodbav:"completed_ms,omitempty"`
	ExpiresAt     int64  `dynamodbav:"expires_at,omitempty"` // epoch s, terminal only
	StateShard    string `dynamodbav:"state_shard,omitempty"`
	DueAt         int64  `dynamodbav:"due_at,omitempty"` // epoch ms
	// UnknownSinceMs: when an unknown task's outcome became uncertain, where the
	// write that made it unknown or DeferReadback recorded it; else 0 (UnknownSince).
	UnknownSinceMs int64 `dynamodbav:"unknown_since,omitempty"`
	// OpenUnknownMs: when an earlier attempt's outcome became uncertain and stayed open (Requeue
	// from running, deduplicating provider), whatever later attempts record, until settled.
	OpenUnknownMs int64  `dynamodbav:"open_unknown_ms,omitempty"`
	ReviewReason  string `dynamodbav:"review_reason,omitempty"`
	ReviewSummary string `dynamodbav:"review_summary,omitempty"`
	ParkCount     int    `dynamodbav:"park_count,omitempty"` // as on its review item (operators' optimistic concurrency)
	// CreateNonce (per Create) and WriteNonce (per conditional write) let
	// a call whose reply was lost recognise its own write (doc.go).
	CreateNonce string `dynamodbav:"create_nonce,omitempty"`
	WriteNonce  string `dynamodbav:"write_nonce,omitempty"`
	// CallStartedVersion: the assignment version whose worker marked its provider call started
	// (MarkCallStarted; providers without idempotency keys), so the current one's iff equal.
	CallStartedVersion int64 `dynamodbav:"call_started_version,omitempty"`
	// ClaimedMs, CallStartedMs and AttemptLog are the attempt history (History).
	ClaimedMs     int64    `dynamodbav:"claimed_ms,omitempty"`
	CallStartedMs int64    `dynamodbav:"call_started_ms,omitempty"`
	AttemptLog    []string `dynamodbav:"attempt_log,omitempty"`
	Dispatches    int      `dynamodbav:"dispatches,omitempty"` // the reconciler's outbox re-sends
	// CancelVersion: the assignment version a cancel while running fenced (CancelRunning), 0 if
	// none; kept once the cancel is decided (CancelledWhileRunning: whether it is the current one).
	CancelVersion int64 `dynamodbav:"cancel_version,omitempty"`
	// BudgetMaxTokens and BudgetMaxMicros: the spend budget (0: unlimited; DESIGN §13). A
	// regenerate shares its chain's (ChainBudget), named by ChainRoot (the root's id, "" on
	// the root) and ChainEpochMs (the root's creation).
	BudgetMaxTokens int64         `dynamodbav:"budget_max_tokens,omitempty"`
	BudgetMaxMicros int64         `dynamodbav:"budget_max_micros,omitempty"`
	ChainRoot       string        `dynamodbav:"chain_root,omitempty"`
	ChainEpochMs    int64         `dynamodbav:"chain_epoch_ms,omitempty"`
	InputRef        *PayloadRef   `dynamodbav:"input_ref,omitempty"`       // replaces Input, kept in S3 (DESIGN §12)
	ResultRef       *PayloadRef   `dynamodbav:"result_ref,omitempty"`      // replaces Result (internal/payload.ResultKey)
	Documents       []DocumentRef `dynamodbav:"documents,omitempty"`       // a generate task's uploads
	Provenance      *Provenance   `dynamodbav:"provenance,omitempty"`      // where a deliver task came from
	RequesterEmail  string        `dynamodbav:"requester_email,omitempty"` // the JWT's email claim, if emailed
	Approval
	Conversation
}

// PastRetention reports whether the task's retention window (expires_at, terminal tasks only) is
// over at now: Create then records a fresh task under its id, so every reader must take it as gone.
func (t *Task) PastRetention(now time.Time) bool {
	return t.ExpiresAt > 0 && t.ExpiresAt < now.Unix()
}

// HasBudget reports whether the task carries a spend budget.
func (t *Task) HasBudget() bool { return t.BudgetMaxTokens > 0 || t.BudgetMaxMicros > 0 }

// ChainBudget names the budget record of the task's regenerate chain: "<root id>.<root's creation,
// epoch ms, base 36>" (the id alone for a root created before BudgetNamesSince). Budget records
// outlive retention, after which the id names a new task that must not count its predecessor's spend.
func (t *Task) ChainBudget() string { return budgetName(t.Chain(), t.ChainEpoch()) }

// OwnBudget names the task's own budget record the same way, by its id and
// creation; it prefixes the ids of the task's reservations.
func (t *Task) OwnBudget() string { return budgetName(t.TaskID, t.CreatedMs) }

// BudgetNamesSince (epoch ms) is when budget records began to carry their task's (or chain root's)
// creation: older ones (and a creation unknown, 0) keep the id alone, so an upgrade finds their spend.
const BudgetNamesSince int64 = 1796162400000 // 2026-12-01T22:00:00Z

func budgetName(id string, createdMs int64) string {
	if createdMs < BudgetNamesSince {
		return id
	}
	return id + "." + strconv.FormatInt(createdMs, 36)
}

// ChainEpoch is the creation (epoch ms) of the task's chain's root, which a
// regenerate of the task carries as ChainEpochMs.
func (t *Task) ChainEpoch() int64 {
	if t.ChainRoot != "" {
		return t.ChainEpochMs
	}
	return t.CreatedMs
}

// Chain returns the id of the task's regenerate chain's root (maybe its own).
func (t *Task) Chain() string { return cmp.Or(t.ChainRoot, t.TaskID) }

// OperationID is the stable provider idempotency key of the task.
func (t *Task) OperationID() string { return t.TaskID }

// Created returns the creation time.
func (t *Task) Created() time.Time { return time.UnixMilli(t.CreatedMs).UTC() }

// BudgetLeft reports whether another attempt is allowed at now, and if not,
// which budget ran out ("max_attempts" or "max_age").
func (t *Task) BudgetLeft(now time.Time) (bool, string) {
	if t.MaxAttempts > 0 && t.Attempts >= t.MaxAttempts {
		return false, "max_attempts"
	}
	if t.DeadlineMs > 0 && now.UnixMilli() >= t.DeadlineMs {
		return false, "max_age"
	}
	return true, ""
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// UnmarshalDynamoDBAttributeValue decodes a task item and derives the RFC
// 3339 timestamps from the epoch ms the item keeps.
func (t *Task) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	type item Task // the same fields, without this method
	if err := attributevalue.Unmarshal(av, (*item)(t)); err != nil {
		return err
	}
	t.CreatedAt, t.UpdatedAt, t.CompletedAt = msString(t.CreatedMs), msString(t.UpdatedMs), msString(t.CompletedMs)
	return nil
}

// msString formats epoch ms as RFC 3339 UTC; "" for 0.
func msString(ms int64) string {
	if ms == 0 {
		return ""
	}
	return rfc3339(time.UnixMilli(ms))
}

// CancelledWhileRunning reports whether t's current assignment is the one a cancel while running
// left (row cancel_running), so that cancel is what its unknown or unknown_outcome state is about;
// not after an operator's retry of its park and the claim after it, though cancel_version stays.
func (t *Task) CancelledWhileRunning() bool {
	return gCancelOfPrev.holds(t, &Call{Version: t.AssignmentVersion})
}
