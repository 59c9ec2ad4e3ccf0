package ledger

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is returned (wrapped) when a task or review item does not exist.
var ErrNotFound = errors.New("ledger: not found")

// DuplicateError: the task (scope, idempotency key, payload) exists already, as Task: a replay.
type DuplicateError struct{ Task *Task }

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("ledger: task %s already exists for this idempotency key", e.Task.TaskID)
}

// PayloadMismatchError: the idempotency key was used before with another payload; nothing was written.
type PayloadMismatchError struct{ TaskID, ExistingSHA256, NewSHA256 string }

func (e *PayloadMismatchError) Error() string {
	return fmt.Sprintf("ledger: idempotency key of task %s was used with a different payload", e.TaskID)
}

// FencedError reports that the caller no longer holds the assignment it
// names (another worker claimed the task, or it left running): save nothing.
type FencedError struct {
	TaskID  string
	Version int64  // the caller's assignment version
	Current *Task  // the task as read after the rejected write (nil if gone)
	Why     string // "already_completed", "taken_over", "not_running" or "gone"
}

func (e *FencedError) Error() string {
	cur := cmp.Or(e.Current, &Task{}) // gone: version 0, no state
	return fmt.Sprintf("ledger: task %s: assignment %d fenced (%s; now version %d, state %s)",
		e.TaskID, e.Version, e.Why, cur.AssignmentVersion, cur.State)
}

// Reasons a task cannot be claimed.
const (
	ReasonTerminal        = "terminal"         // completed, failed or cancelled: acknowledge
	ReasonParked          = "parked"           // needs_review or awaiting_approval: acknowledge
	ReasonLeased          = "leased"           // a live lease elsewhere: acknowledge
	ReasonNotDue          = "not_due"          // retry_wait before not_before: retry later
	ReasonUnknown         = "unknown_outcome"  // waiting for readback by the reconciler
	ReasonBudgetExhausted = "budget_exhausted" // park it
	ReasonExpiredLease    = "expired_lease"    // running, lease expired, takeover not allowed
	ReasonNotFound        = "not_found"
)

// NotClaimableError explains why Claim did not take the task.
type NotClaimableError struct {
	TaskID string
	Reason string
	Budget string // with ReasonBudgetExhausted: "max_attempts" or "max_age"
	Task   *Task  // the task as read after the failed claim (nil when not found)
}

func (e *NotClaimableError) Error() string {
	return fmt.Sprintf("ledger: task %s not claimable: %s", e.TaskID, e.Reason)
}

// ConflictError reports a state transition the task's current state does not allow.
type ConflictError struct {
	TaskID, Op string
	State      State
	Task       *Task // the task as read after the rejected write
}

// conflict is the ConflictError of op refused by t (nil: gone).
func conflict(op, taskID string, t *Task) *ConflictError {
	return &ConflictError{TaskID: taskID, Op: op, Task: t, State: cmp.Or(t, &Task{}).State}
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("ledger: %s not allowed for task %s in state %s", e.Op, e.TaskID, e.State)
}

// ThrottledError: DynamoDB throttled the request past the SDK's bounded retries, a transaction
// conflicted, or Create's watch put was too slow (its watch item stays); nothing else was written.
type ThrottledError struct {
	Op         string
	RetryAfter time.Duration
	Err        error
}

func (e *ThrottledError) Error() string { return fmt.Sprintf("ledger: %s throttled: %v", e.Op, e.Err) }
func (e *ThrottledError) Unwrap() error { return e.Err }

// ItemTooLargeError: a write refused, by the ledger's own check (Err nil) or by DynamoDB, as its
// item would exceed the 400 KB limit. Nothing was written; repeating the write cannot succeed.
type ItemTooLargeError struct {
	TaskID, Op string
	// Bytes: the item's computed size (0: only DynamoDB's error is known); ResultBytes: the result's.
	Bytes, ResultBytes, Limit int
	Err                       error
}

func (e *ItemTooLargeError) Error() string {
	if e.Err != nil && e.Bytes == 0 {
		return fmt.Sprintf("ledger: %s: item too large for DynamoDB (limit %d bytes): %v", e.Op, e.Limit, e.Err)
	}
	return fmt.Sprintf("ledger: %s of task %s: item would be %d bytes, over DynamoDB's limit of %d (result %d bytes); nothing written",
		e.Op, e.TaskID, e.Bytes, e.Limit, e.ResultBytes)
}

func (e *ItemTooLargeError) Unwrap() error { return e.Err }
