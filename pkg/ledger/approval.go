package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const (
	// Approval states (the task view's approval.state).
	ApprovalPending   = "pending"
	ApprovalApproved  = "approved"
	ApprovalRejected  = "rejected"
	ApprovalWithdrawn = "withdrawn"
	ApprovalExpired   = "expired"

	ReviewApprovalExpired = "approval_expired"  // the review reason: the approval deadline passed undecided
	DefaultApprovalTTL    = 72 * time.Hour      // of a gated task whose plan names none
	MaxApprovalTTL        = 30 * 24 * time.Hour // the longest Create and the API accept (spend's retention relies on it)
	MaxDeliveries         = 10                  // one approval's deliver tasks (its TransactWriteItems: at most 100 items)
	KindDeliver           = "deliver"           // the kind of the effect tasks an approval creates
)

// Approval is a task's approval gate, fixed at submit with Plan, and the
// decisions on it (DESIGN §10), embedded in Task.
type Approval struct {
	// Plan is the submitted plan's canonical JSON {"approval":{...},"deliver":[...]}, in the payload hash.
	Plan               string `dynamodbav:"plan,omitempty"`
	ApprovalRequired   bool   `dynamodbav:"approval_required,omitempty"` // a completion awaits approval
	ApprovalTTLSeconds int64  `dynamodbav:"approval_ttl_s,omitempty"`
	ResultSHA256       string `dynamodbav:"result_sha256,omitempty"` // of the stored bytes; an approver echoes it
	// Generated* keep the artifact an approver edited (the edit became Result); *Ref: in S3.
	GeneratedResult    string      `dynamodbav:"generated_result,omitempty"`
	GeneratedSHA256    string      `dynamodbav:"generated_sha256,omitempty"`
	GeneratedResultRef *PayloadRef `dynamodbav:"generated_result_ref,omitempty"`
	ApprovalState      string      `dynamodbav:"approval_state,omitempty"`
	ApprovalDeadlineMs int64       `dynamodbav:"approval_deadline_ms,omitempty"`
	// ApprovalSHA256: the artifact last decided (the edit, if any); ApprovalBasisSHA256: the one shown and echoed.
	ApprovalSHA256      string `dynamodbav:"approval_sha256,omitempty"`
	ApprovalBasisSHA256 string `dynamodbav:"approval_basis_sha256,omitempty"`
	DecidedBy           string `dynamodbav:"decided_by,omitempty"`
	DecidedAt           string `dynamodbav:"decided_at,omitempty"`
	ApprovalNote        string `dynamodbav:"approval_note,omitempty"`
	ApprovalPolicy      string `dynamodbav:"approval_policy,omitempty"` // the policy that allowed the decision
	ApprovalRound       int    `dynamodbav:"approval_round,omitempty"`  // withdrawals so far (DeliveryKey's round)
	// DeliveryIDs: the standing approval's deliver tasks; Withdrawn*: withdrawn ones' (cancelled).
	DeliveryIDs          []string `dynamodbav:"delivery_ids,omitempty"`
	WithdrawnDeliveryIDs []string `dynamodbav:"withdrawn_delivery_ids,omitempty"`
}

// ApprovalTTL is how long a completion of t waits for approval; 0: no gate.
func (t *Task) ApprovalTTL() time.Duration {
	if !t.ApprovalRequired {
		return 0
	}
	if t.ApprovalTTLSeconds <= 0 {
		return DefaultApprovalTTL
	}
	return time.Duration(t.ApprovalTTLSeconds) * time.Second
}

// SHA256Hex is the lowercase hex SHA-256 of s.
func SHA256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// DeliveryKey is the idempotency key (in the task's scope) of the deliver
// task for plan entry index approving sha in round: after a withdrawal, new work.
func DeliveryKey(taskID, sha string, index, round int) string {
	return "approval:" + taskID + ":" + sha + ":" + strconv.Itoa(index) + pick(round > 0, ":r"+strconv.Itoa(round), "")
}

// resultSHA256 is the result's hex SHA-256; in S3, its reference's (verified on every read).
func (c Completion) resultSHA256() string {
	if c.ResultRef != nil {
		return c.ResultRef.SHA256
	}
	return SHA256Hex(c.Result)
}

// ApproveRequest is one approval of a task awaiting approval.
type ApproveRequest struct {
	ArtifactSHA256   string // of the result the approver was shown: the task's result_sha256
	EditedResult     string // JSON replacing the result ("" for none); the generated one is kept
	By, Note, Policy string
	Deliveries       []NewTask // one per plan entry, keyed DeliveryKey, parent the task
	FollowUps        []NewTask // the requester's notification (at most MaxFollowUps)
}

// ArtifactChangedError: the approved hash is not the current result; nothing was written.
type ArtifactChangedError struct {
	TaskID         string
	ApprovedSHA256 string
	CurrentSHA256  string
	Task           *Task
}

func artifactChanged(r ApproveRequest, t *Task) *ArtifactChangedError {
	return &ArtifactChangedError{TaskID: t.TaskID, ApprovedSHA256: r.ArtifactSHA256, CurrentSHA256: t.ResultSHA256, Task: t}
}

func (e *ArtifactChangedError) Error() string {
	return fmt.Sprintf("ledger: task %s: approved artifact %.12s is not the current result %.12s", e.TaskID, e.ApprovedSHA256, e.CurrentSHA256)
}

// Approve completes t (as read) and creates its deliver and follow-up tasks in ONE
// TransactWriteItems (rows approve, approve_delivery); the same approval again writes nothing
// and returns t, replay=true. Errors: *ArtifactChangedError, *ConflictError (not awaiting
// approval, or a delivery id taken), *ItemTooLargeError, *ThrottledError.
func (l *Ledger) Approve(ctx context.Context, t *Task, r ApproveRequest) (_ *Task, replay bool, _ error) {
	if len(r.Deliveries) > MaxDeliveries {
		return nil, false, fmt.Errorf("ledger: Approve %s: %d deliveries, at most %d", t.TaskID, len(r.Deliveries), MaxDeliveries)
	}
	approved := pick(r.EditedResult != "", SHA256Hex(r.EditedResult), r.ArtifactSHA256)
	if approvedAlready(t, r, approved) {
		return t, true, nil
	}
	now := l.cfg.Now().UTC()
	tr, c := row("approve"), &Call{Now: now, SHA256: r.ArtifactSHA256, Round: t.ApprovalRound}
	switch { // the row's guards, asked of t as read
	case !slices.Contains(tr.From, t.State):
		return nil, false, conflict("approve", t.TaskID, t)
	case !gArtifact.holds(t, c):
		return nil, false, artifactChanged(r, t)
	case !gApprovalOpen.holds(t, c):
		// The reconciler parks it approval_expired: an approval would race that park and win.
		return nil, false, conflict("approve after the approval deadline", t.TaskID, t)
	}
	ids := make([]string, 0, len(r.Deliveries))
	items := make([]types.TransactWriteItem, 0, len(r.Deliveries)+1)
	for _, n := range r.Deliveries {
		// A delivery's receipt and provenance name exactly this decision.
		n.DecidedBy, n.DecidedAt, n.ApprovalPolicy = r.By, rfc3339(now), r.Policy
		n.Provenance = &Provenance{Type: ProvenanceApproval, TaskID: t.TaskID, ArtifactSHA256: approved, DecidedBy: r.By, Round: t.ApprovalRound}
		d, put, err := l.newTaskPut("approve", n, now)
		if err != nil {
			return nil, false, err
		}
		ids, items = append(ids, d.TaskID), append(items, put)
	}
	fs, err := l.followUpItems("approve", t.TaskID, r.FollowUps, now, nil)
	if err != nil {
		return nil, false, err
	}
	items = append(items, fs...)
	u := newUpdate()
	l.off(u, StateCompleted, now)
	u.set("approval_sha256", str(approved))
	u.set("approval_basis_sha256", str(r.ArtifactSHA256))
	decided(u, ApprovalApproved, r.By, r.Note, r.Policy, now)
	if len(ids) > 0 {
		u.set("delivery_ids", strList(ids))
	} else {
		u.remove("delivery_ids")
	}
	if r.EditedResult != "" {
		u.set("result", str(r.EditedResult))
		u.set("result_sha256", str(approved))
		// The generated artifact is kept once, not overwritten by a second edit (after a
		// withdraw); one in S3 by its reference (the edit is inline).
		if t.GeneratedSHA256 == "" {
			u.set("generated_sha256", str(t.ResultSHA256))
			if t.ResultRef != nil {
				av, _ := attributevalue.Marshal(t.ResultRef)
				u.set("generated_result_ref", av)
			} else {
				u.set("generated_result", str(t.Result))
			}
		}
		if t.ResultRef != nil {
			u.remove("result_ref")
		}
	}
	u.stamp(now)
	u.result = len(r.EditedResult)
	if err := tr.condition(u, c).fits(l.cfg.TasksTable, t.TaskID, "approve"); err != nil {
		return nil, false, err
	}
	cur, err := l.decide(ctx, "approve", t.TaskID, u, items)
	switch ce, _ := errors.AsType[*ConflictError](err); {
	case err == nil:
		return cur, false, nil
	case ce == nil || ce.Task == nil:
	case approvedAlready(ce.Task, r, approved):
		return ce.Task, true, nil // a racing identical approval won
	case slices.Contains(tr.From, ce.Task.State) && !gArtifact.holds(ce.Task, c):
		return nil, false, artifactChanged(r, ce.Task)
	}
	return nil, false, err
}

// approvedAlready: t records this approval (same basis, same artifact).
func approvedAlready(t *Task, r ApproveRequest, approved string) bool {
	return t.State == StateCompleted && t.ApprovalState == ApprovalApproved &&
		t.ApprovalBasisSHA256 == r.ArtifactSHA256 && t.ApprovalSHA256 == approved
}

// Reject records that a person rejected t's result as read (row reject); a rejected task is
// returned unchanged, replay=true. Errors: *ConflictError (not awaiting approval), ErrNotFound.
func (l *Ledger) Reject(ctx context.Context, t *Task, by, note, policy string) (_ *Task, replay bool, _ error) {
	if t.State == StateRejected {
		return t, true, nil
	}
	now := l.cfg.Now().UTC()
	u := newUpdate()
	l.off(u, StateRejected, now)
	u.set("approval_sha256", str(t.ResultSHA256))
	decided(u, ApprovalRejected, by, note, policy, now)
	return l.decideOne(ctx, "reject", t.TaskID, &Call{Now: now, SHA256: t.ResultSHA256}, u)
}

// DeliveriesStartedError: a withdrawal found started deliveries; they stand, nothing was written.
type DeliveriesStartedError struct {
	TaskID     string
	Deliveries []*Task // every delivery of the standing approval, as read
}

func (e *DeliveriesStartedError) Error() string {
	return fmt.Sprintf("ledger: task %s: cannot withdraw the approval, %d deliveries have started", e.TaskID, len(Started(e.Deliveries)))
}

// Started returns the deliveries claimed at least once or no longer queued.
func Started(ds []*Task) []*Task {
	var out []*Task
	for _, d := range ds {
		if d.State != StateQueued || d.AssignmentVersion != 0 {
			out = append(out, d)
		}
	}
	return out
}

// Deliveries reads the deliver tasks ids (consistent); a missing one is a task with only its id.
func (l *Ledger) Deliveries(ctx context.Context, ids []string) ([]*Task, error) {
	out := make([]*Task, 0, len(ids))
	for _, id := range ids {
		d, err := l.Get(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			d = &Task{TaskID: id}
		case err != nil:
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Withdraw withdraws a completed task's standing approval, its deliveries all unstarted, in ONE
// TransactWriteItems (rows withdraw, withdraw_delivery); a delivery claimed in between refuses it,
// decided again from fresh reads. A withdrawn approval is returned unchanged. notify's follow-ups
// (to approvers) join it unless the new round is due at once (nextRoundDeadline): nobody could
// decide it. Errors: *DeliveriesStartedError, *ConflictError (no standing approval), ErrNotFound.
func (l *Ledger) Withdraw(ctx context.Context, taskID, by, note, policy string, notify ...func(*Task) []NewTask) (*Task, error) {
	for try := 0; ; try++ {
		t, err := l.Get(ctx, taskID)
		if err != nil {
			return nil, err
		}
		if t.State == StateAwaitingApproval && t.ApprovalState == ApprovalWithdrawn {
			return t, nil // already withdrawn (a repeated request): unchanged
		}
		c := &Call{Round: t.ApprovalRound}
		if !row("withdraw").Allows(t, *c) {
			return nil, conflict("withdraw", taskID, t)
		}
		ds, err := l.Deliveries(ctx, t.DeliveryIDs)
		if err != nil {
			return nil, err
		}
		if len(Started(ds)) > 0 {
			return nil, &DeliveriesStartedError{TaskID: taskID, Deliveries: ds}
		}
		now := l.cfg.Now().UTC()
		items := make([]types.TransactWriteItem, 0, len(ds))
		for _, d := range ds {
			du := newUpdate()
			l.off(du, StateCancelled, now)
			setError(du, "withdrawn", "the approval was withdrawn before this delivery started")
			du.stamp(now)
			du.setNonce()
			in := row("withdraw_delivery").condition(du, &Call{Now: now, Parent: taskID}).input(l.cfg.TasksTable, d.TaskID)
			items = append(items, types.TransactWriteItem{Update: txUpdate(&types.Update{TableName: &l.cfg.TasksTable}, in)})
		}
		deadline := nextRoundDeadline(t, now)
		for _, f := range notify {
			if deadline <= now.UnixMilli() {
				break
			}
			fs, err := l.followUpItems("withdraw", taskID, f(t), now, nil)
			if err != nil {
				return nil, err
			}
			items = append(items, fs...)
		}
		u := newUpdate()
		l.live(u, StateAwaitingApproval, taskID, deadline)
		u.set("approval_deadline_ms", num(deadline))
		u.remove("expires_at", "delivery_ids")
		decided(u, ApprovalWithdrawn, by, note, policy, now)
		u.set("approval_round", num(int64(t.ApprovalRound+1)))
		if len(t.DeliveryIDs) > 0 {
			// The round condition makes t's lists the current ones.
			u.set("withdrawn_delivery_ids", strList(slices.Concat(t.WithdrawnDeliveryIDs, t.DeliveryIDs)))
		}
		u.stamp(now)
		c.Now = now
		cur, err := l.decide(ctx, "withdraw", taskID, row("withdraw").condition(u, c), items)
		if _, ok := errors.AsType[*ConflictError](err); ok && try < 2 {
			continue // a delivery or the task moved: decide again from fresh reads
		}
		return cur, err
	}
}

// nextRoundDeadline is the next round's deadline, a withdrawal at now's: a full approval TTL, so whoever
// withdrew can decide again, never before the old round's nor past MaxApprovalTTL after the result was saved.
func nextRoundDeadline(t *Task, now time.Time) int64 {
	fresh := min(now.Add(t.ApprovalTTL()).UnixMilli(), t.CompletedMs+MaxApprovalTTL.Milliseconds())
	return max(t.ApprovalDeadlineMs, fresh, now.UnixMilli())
}

// ExpireApproval parks t (read awaiting_approval past its deadline) approval_expired with r (row
// expire_approval: a round reopened since is left to its approvers); followUps notify of it.
func (l *Ledger) ExpireApproval(ctx context.Context, t *Task, r Review, followUps ...NewTask) (*Task, error) {
	r.Reason = ReviewApprovalExpired
	return l.Park(ctx, t, ParkOptions{State: StateAwaitingApproval, Version: t.AssignmentVersion, DueAt: t.DueAt, FollowUps: followUps}, r)
}

// decide sends u and items in one transaction (txWrite); refused: *ConflictError, the task as read.
func (l *Ledger) decide(ctx context.Context, op, taskID string, u *update, items []types.TransactWriteItem) (*Task, error) {
	cur, refused, err := l.txWrite(ctx, op, taskID, u, items)
	switch {
	case !refused:
		return cur, err
	case cur == nil:
		return nil, &notFound{taskID}
	}
	return nil, conflict(op, taskID, cur)
}

// decided records a decision: the approval state it leaves, by whom, when and why.
func decided(u *update, state, by, note, policy string, now time.Time) {
	u.set("approval_state", str(state))
	u.set("decided_by", str(by))
	u.set("decided_at", str(rfc3339(now)))
	if note != "" {
		u.set("approval_note", str(truncate(note, MaxErrorMessage)))
	} else {
		u.remove("approval_note")
	}
	if policy != "" {
		u.set("approval_policy", str(policy))
	}
}

func strList(ss []string) types.AttributeValue {
	l := make([]types.AttributeValue, len(ss))
	for i, s := range ss {
		l[i] = str(s)
	}
	return &types.AttributeValueMemberL{Value: l}
}
