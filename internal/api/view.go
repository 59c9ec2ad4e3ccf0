package api

import (
	"encoding/json"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// TaskView is the JSON representation of a task (DESIGN §5). Internal
// fields (scope, idempotency key, lease, fencing version, input) are never
// shown.
type TaskView struct {
	TaskID        string `json:"task_id"`
	State         string `json:"state"`
	Kind          string `json:"kind"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
	Attempts      int    `json:"attempts"`
	MaxAttempts   int    `json:"max_attempts"`
	ParentTaskID  string `json:"parent_task_id,omitempty"`
	CorrelationID string `json:"correlation_id"`
	// Documents are the uploaded documents a generate task references
	// (documents.go).
	Documents []DocumentView `json:"documents,omitempty"`
	// Result is the saved result, as JSON (completed tasks only).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the last recorded failure (not shown once completed).
	Error   *ErrorView  `json:"error,omitempty"`
	Receipt ReceiptView `json:"receipt"`
	// Provenance is where a deliver task came from, as its destination is
	// told (deliver tasks only).
	Provenance *ProvenanceView `json:"provenance,omitempty"`
	// Review explains a parked task (needs_review only).
	Review *ReviewView `json:"review,omitempty"`
	// Budget, Usage and ChainUsage: tasks with a spend budget only (spend.go).
	Budget     *BudgetView `json:"budget,omitempty"`
	Usage      *UsageView  `json:"usage,omitempty"`
	ChainUsage *UsageView  `json:"chain_usage,omitempty"`
	// ResultSHA256 is the hex SHA-256 of the saved result's exact bytes:
	// the artifact_sha256 an approval names.
	ResultSHA256 string `json:"result_sha256,omitempty"`
	// GeneratedSHA256 is the generated artifact's hash when an approver
	// edited it (the edit is the result).
	GeneratedSHA256 string `json:"generated_sha256,omitempty"`
	// Approval is the task's approval gate and last decision (gated
	// tasks only); Deliveries its deliver tasks.
	Approval   *ApprovalView  `json:"approval,omitempty"`
	Deliveries []DeliveryView `json:"deliveries,omitempty"`
	// ConversationID is the conversation the task belongs to (a generate
	// input's conversation_id; GET /conversations/{id} lists its tasks).
	ConversationID string `json:"conversation_id,omitempty"`
	// Progress says what is happening now (progress.go).
	Progress *ProgressView `json:"progress,omitempty"`
	// AttemptsHistory is what each attempt did, oldest first (history.go).
	AttemptsHistory []AttemptView `json:"attempts_history"`
	// Plan is what an approval sends where (gated tasks, shown only to a
	// caller who may decide on the task: approvalview.go), or what the
	// completion delivers without approval (shown to the owner).
	Plan *PlanView `json:"plan,omitempty"`
}

// ErrorView is a task's last failure.
type ErrorView struct {
	Class   string `json:"class"`
	Message string `json:"message"`
}

// ReceiptView says what was sent to whom and what came back.
type ReceiptView struct {
	// OperationID is the idempotency key the provider sees (the task id).
	OperationID   string `json:"operation_id"`
	PayloadSHA256 string `json:"payload_sha256"`
	Provider      string `json:"provider,omitempty"`
	ProviderRef   string `json:"provider_ref,omitempty"`
	CompletedAt   string `json:"completed_at,omitempty"`
	// ReadbackAt is set when the result was recovered by reading the
	// provider back after an uncertain attempt.
	ReadbackAt string `json:"readback_at,omitempty"`
	// ResultBytes and ResultSHA256 describe a result kept in the payload
	// bucket (above the inline threshold): its size and SHA-256 as verified
	// on every read. A result over MaxViewResult is described, not shown.
	ResultBytes  int64  `json:"result_bytes,omitempty"`
	ResultSHA256 string `json:"result_sha256,omitempty"`
	// DeliveryReceipt holds the receipt fields of a deliver task (every
	// field of DESIGN §10's receipt; view_deliver.go); absent otherwise.
	*DeliveryReceipt
}

// ReviewView is the review item of a parked task.
type ReviewView struct {
	Reason      string   `json:"reason"`
	Summary     string   `json:"summary"`
	Known       []string `json:"known"`
	Uncertain   []string `json:"uncertain"`
	SafeActions []string `json:"safe_actions"`
}

// NewTaskView renders t. r is t's review item, used only when t is in
// needs_review; when it is nil there, the reason and summary stored on the
// task are shown.
func NewTaskView(t *ledger.Task, r *ledger.Review) TaskView {
	v := TaskView{
		TaskID:         t.TaskID,
		State:          string(t.State),
		Kind:           t.Kind,
		CreatedAt:      t.CreatedAt,
		UpdatedAt:      t.UpdatedAt,
		Attempts:       t.Attempts,
		MaxAttempts:    t.MaxAttempts,
		ParentTaskID:   t.ParentTaskID,
		CorrelationID:  t.CorrelationID,
		Documents:      documentViews(t.Documents),
		ConversationID: t.ConversationID,
		Receipt: ReceiptView{
			OperationID:   t.OperationID(),
			PayloadSHA256: t.PayloadSHA256,
			Provider:      t.Provider,
			ProviderRef:   t.ProviderRef,
			CompletedAt:   t.CompletedAt,
			ReadbackAt:    t.ReadbackAt,
		},
	}
	v.AttemptsHistory = historyOf(t, nil)
	if v.CorrelationID == "" {
		v.CorrelationID = t.TaskID
	}
	addDeliveryReceipt(&v.Receipt, t)
	v.Provenance = provenanceView(t) // view_deliver.go
	if showsResult(t) && t.Result != "" {
		if json.Valid([]byte(t.Result)) {
			v.Result = json.RawMessage(t.Result)
		} else {
			// Never expected (results are JSON); still show it, as a string.
			b, _ := json.Marshal(t.Result)
			v.Result = b
		}
	}
	if t.State != ledger.StateCompleted && t.ErrorClass != "" {
		v.Error = &ErrorView{Class: t.ErrorClass, Message: t.ErrorMessage}
	}
	if t.State == ledger.StateNeedsReview {
		rv := &ReviewView{Reason: t.ReviewReason, Summary: t.ReviewSummary}
		if r != nil {
			rv = &ReviewView{Reason: r.Reason, Summary: r.Summary, Known: r.Known, Uncertain: r.Uncertain, SafeActions: r.SafeActions}
		}
		for _, l := range []*[]string{&rv.Known, &rv.Uncertain, &rv.SafeActions} {
			if *l == nil {
				*l = []string{}
			}
		}
		v.Review = rv
	}
	return v
}
