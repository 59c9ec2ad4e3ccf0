package opsapi

import (
	"encoding/json"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Task is the operator's view of a task: the public task view plus the
// bookkeeping an operator needs (version, lease, deadline, dispatches). It
// never includes the task's input.
type Task struct {
	TaskID            string          `json:"task_id"`
	State             ledger.State    `json:"state"`
	Kind              string          `json:"kind"`
	CreatedAt         string          `json:"created_at"`
	UpdatedAt         string          `json:"updated_at"`
	Attempts          int             `json:"attempts"`
	MaxAttempts       int             `json:"max_attempts"`
	Deadline          string          `json:"deadline,omitempty"`
	AssignmentVersion int64           `json:"assignment_version"`
	LeaseOwner        string          `json:"lease_owner,omitempty"`
	LeaseUntil        string          `json:"lease_until,omitempty"`
	NotBefore         string          `json:"not_before,omitempty"`
	Dispatches        int             `json:"dispatches,omitempty"`
	ParentTaskID      string          `json:"parent_task_id,omitempty"`
	CorrelationID     string          `json:"correlation_id,omitempty"`
	PayloadSHA256     string          `json:"payload_sha256,omitempty"`
	Result            json.RawMessage `json:"result,omitempty"`
	Error             *TaskError      `json:"error,omitempty"`
	Receipt           *Receipt        `json:"receipt,omitempty"`
	ReviewReason      string          `json:"review_reason,omitempty"`
	ReviewSummary     string          `json:"review_summary,omitempty"`
	// ResultRef is where a result above the inline threshold lives (the
	// S3 claim-check); the operator view shows the reference, not the bytes.
	ResultRef *ledger.PayloadRef `json:"result_ref,omitempty"`
}

// TaskError is the last recorded failure of a task.
type TaskError struct {
	Class   string `json:"class"`
	Message string `json:"message,omitempty"`
}

// Receipt is the provenance of a task's result.
type Receipt struct {
	OperationID string `json:"operation_id"`
	Provider    string `json:"provider,omitempty"`
	ProviderRef string `json:"provider_ref,omitempty"`
	CompletedAt string `json:"completed_at,omitempty"`
	ReadbackAt  string `json:"readback_at,omitempty"`
	// Delivery holds a deliver task's receipt fields (destination,
	// identity, public URL, readback result, approval); nil otherwise.
	Delivery *deliver.TaskReceipt `json:"delivery,omitempty"`
}

// ViewTask returns the operator's view of t (nil for nil).
func ViewTask(t *ledger.Task) *Task {
	if t == nil {
		return nil
	}
	v := &Task{
		TaskID: t.TaskID, State: t.State, Kind: t.Kind, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, Deadline: ms(t.DeadlineMs),
		AssignmentVersion: t.AssignmentVersion, LeaseOwner: t.LeaseOwner, LeaseUntil: ms(t.LeaseUntil),
		NotBefore: ms(t.NotBefore), Dispatches: t.Dispatches, ParentTaskID: t.ParentTaskID,
		CorrelationID: t.CorrelationID, PayloadSHA256: t.PayloadSHA256,
		ReviewReason: t.ReviewReason, ReviewSummary: t.ReviewSummary,
	}
	if t.State == ledger.StateCompleted && t.Result != "" {
		if json.Valid([]byte(t.Result)) {
			v.Result = json.RawMessage(t.Result)
		} else {
			v.Result, _ = json.Marshal(t.Result)
		}
	}
	if t.State == ledger.StateCompleted {
		v.ResultRef = t.ResultRef
	}
	if t.ErrorClass != "" {
		v.Error = &TaskError{Class: t.ErrorClass, Message: t.ErrorMessage}
	}
	d, isDelivery := deliver.ReceiptOfTask(t)
	if t.State == ledger.StateCompleted || t.ProviderRef != "" || t.ReadbackAt != "" || isDelivery {
		v.Receipt = &Receipt{OperationID: t.OperationID(), Provider: t.Provider, ProviderRef: t.ProviderRef,
			CompletedAt: t.CompletedAt, ReadbackAt: t.ReadbackAt}
	}
	if isDelivery {
		v.Receipt.Delivery = &d
	}
	return v
}

func ms(v int64) string {
	if v <= 0 {
		return ""
	}
	return time.UnixMilli(v).UTC().Format(time.RFC3339Nano)
}

// ReviewPage is the body of GET /reviews.
type ReviewPage struct {
	Items      []ledger.Review `json:"items"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// ReviewDetail is the body of GET /reviews/{id}: the item and its task
// (null for a poison message, which has none).
type ReviewDetail struct {
	Review *ledger.Review `json:"review"`
	Task   *Task          `json:"task"`
}

// ActionResult is the body of a successful retry or resolve.
type ActionResult struct {
	Review *ledger.Review `json:"review"`
	Task   *Task          `json:"task"`
	// Replayed is true when the same action had already been applied:
	// nothing changed and nothing was sent.
	Replayed bool `json:"replayed"`
	// Dispatched (retry only) says whether the task's message was sent now;
	// false after a failed send means the reconciler's relay will send it.
	Dispatched *bool `json:"dispatched,omitempty"`
	// SpendErr is why settling what the parked run's attempts still held
	// on budgets and the daily quota failed (Apply): the action stands,
	// and those reservations stay counted. Not part of the response.
	SpendErr error `json:"-"`
}
