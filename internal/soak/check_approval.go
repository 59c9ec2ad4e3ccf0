package soak

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Approval gates (DESIGN §10): rules on workflow tasks and the
// deliver tasks their approvals created. Each violation names its task and
// rule.
//
//   - delivery_without_parent: a deliver task whose parent is no task the
//     run submitted;
//   - delivery_not_of_an_approval: a deliver task that is neither in its
//     parent's standing delivery_ids nor in its withdrawn_delivery_ids
//     (it belongs to no approval);
//   - delivery_key_mismatch: a standing delivery's idempotency key is not
//     approval:<task>:<approved sha>:<index>[:r<round>] of its parent's
//     approval, or the approved hash is not the parent's result_sha256, or
//     it is not in its parent's scope;
//   - delivery_payload_not_approved: the payload a delivery carries is not
//     the approved artifact (the parent's result);
//   - delivery_of_unapproved / delivery_of_rejected: a standing delivery
//     whose parent is not completed with an approval (rejected: no
//     delivery ever);
//   - withdrawn_delivery_started: a delivery of a withdrawn approval that
//     is not cancelled, or was claimed (withdrawal is only allowed while
//     every delivery is unstarted);
//   - delivery_count: an approved task's standing deliveries are not one
//     per entry of its plan, or one of them does not exist;
//   - delivery_not_final: a delivery still live after the drain (its state
//     is otherwise not checked: a branch without the deliver executor fails
//     them, which is tolerated);
//   - approve_200_not_approved, reject_200_not_rejected: an answered
//     decision the final state contradicts; approve_deliveries_differ: a
//     200 approve of the standing round names other deliveries than the
//     task has (two approvals of one hash are one approval);
//   - approve_and_reject_both_won: a 200 approve and a 200 reject of one
//     task (without a withdrawal between them);
//   - race_lost_to_reject_has_deliveries: a task whose approval lost the
//     race to a reject has deliveries;
//   - stale_hash_not_refused: an approve of a hash that was not the result
//     was not answered 409 artifact-changed; stale_hash_delivery: a
//     delivery keyed with such a hash exists;
//   - withdraw_refused_but_withdrawn, withdrawn_but_not_recorded: a 409
//     withdraw whose deliveries were cancelled all the same, or a 200
//     withdraw with no withdrawn deliveries on the task;
//   - unexpected_decision_status: a decision answered other than 200 or
//     409 (5xx after every retry included).
//
// It returns the ids of the deliveries it checked (they are no
// "unknown_task").
func (c *checker) approvals(stored map[string]*ledger.Task) map[string]bool {
	s := c.s
	seen := map[string]bool{}
	byParent := map[string][]*ledger.Task{}
	for id, d := range stored {
		if d.Kind != ledger.KindDeliver || (d.ParentTaskID == "" && s.byID[id] != nil) || isFollowUp(d) {
			continue // not a delivery, a direct deliver submit of the run (no approval), or a follow-up (check_followup.go)
		}
		seen[id] = true
		pt := s.byID[d.ParentTaskID]
		parent := stored[d.ParentTaskID]
		if pt == nil || parent == nil {
			c.add(KindNone, id, "delivery_without_parent", "deliver task of parent %q, not a task of this run", d.ParentTaskID)
			continue
		}
		byParent[parent.TaskID] = append(byParent[parent.TaskID], d)
		c.approvedDelivery(pt, parent, d)
	}
	s.wf.mu.Lock()
	defer s.wf.mu.Unlock()
	for _, t := range s.tasks {
		if !isWorkflow(t.kind) {
			continue
		}
		st := stored[t.id]
		if st == nil {
			continue
		}
		c.workflowTask(t, st, stored, byParent[t.id], s.wf.calls[t.id])
	}
	row := c.row(WfApproveWithdraw)
	if s.wf.gaveUp > 0 {
		row.Note = strings.TrimPrefix(row.Note+"; approvers that settled a task left awaiting approval: "+strconv.Itoa(s.wf.gaveUp), "; ")
	}
	return seen
}

// approvedDelivery checks one deliver task an approval created against
// its parent.
func (c *checker) approvedDelivery(pt *task, parent, d *ledger.Task) {
	if d.State.Live() {
		c.add(pt.kind, d.TaskID, "delivery_not_final", "delivery of %s is %s after the drain", parent.TaskID, d.State)
	}
	if slices.Contains(parent.WithdrawnDeliveryIDs, d.TaskID) {
		if d.State != ledger.StateCancelled || d.AssignmentVersion != 0 {
			c.add(pt.kind, d.TaskID, "withdrawn_delivery_started", "delivery of withdrawn approval of %s is %s at assignment %d", parent.TaskID, d.State, d.AssignmentVersion)
		}
		return
	}
	i := slices.Index(parent.DeliveryIDs, d.TaskID)
	if i < 0 {
		c.add(pt.kind, d.TaskID, "delivery_not_of_an_approval", "delivery of %s (key %q) belongs to none of its approvals", parent.TaskID, d.IdempotencyKey)
		return
	}
	switch {
	case parent.State == ledger.StateRejected || parent.ApprovalState == ledger.ApprovalRejected:
		c.add(pt.kind, d.TaskID, "delivery_of_rejected", "delivery of %s, which is %s (approval %s)", parent.TaskID, parent.State, parent.ApprovalState)
	case parent.State != ledger.StateCompleted || parent.ApprovalState != ledger.ApprovalApproved:
		c.add(pt.kind, d.TaskID, "delivery_of_unapproved", "delivery of %s, which is %s (approval %s)", parent.TaskID, parent.State, parent.ApprovalState)
	}
	want := ledger.DeliveryKey(parent.TaskID, parent.ApprovalSHA256, i, parent.ApprovalRound)
	switch {
	case d.IdempotencyKey != want:
		c.add(pt.kind, d.TaskID, "delivery_key_mismatch", "key %q, want %q (delivery %d of the approval of %.12s)", d.IdempotencyKey, want, i, parent.ApprovalSHA256)
	case parent.ApprovalSHA256 != parent.ResultSHA256:
		c.add(pt.kind, d.TaskID, "delivery_key_mismatch", "the approved hash %.12s is not the result's %.12s", parent.ApprovalSHA256, parent.ResultSHA256)
	case d.Scope != parent.Scope:
		c.add(pt.kind, d.TaskID, "delivery_key_mismatch", "scope %q, not its parent's %q", d.Scope, parent.Scope)
	}
	var in struct {
		Payload json.RawMessage `json:"payload"`
	}
	got, err1 := api.CanonicalJSON([]byte(d.Input))
	if err1 == nil && json.Unmarshal(got, &in) == nil {
		got = in.Payload
	}
	wantPayload, err2 := api.CanonicalJSON([]byte(c.s.storedResult(parent)))
	if err1 != nil || err2 != nil || !bytes.Equal(got, wantPayload) {
		c.add(pt.kind, d.TaskID, "delivery_payload_not_approved", "the delivered payload is not the approved result of %s", parent.TaskID)
	}
}

// workflowTask checks a workflow task's deliveries and its approver's
// answers against its final state.
func (c *checker) workflowTask(t *task, st *ledger.Task, stored map[string]*ledger.Task, ds []*ledger.Task, calls []decisionCall) {
	approved := st.State == ledger.StateCompleted && st.ApprovalState == ledger.ApprovalApproved
	if approved {
		n := 0
		for _, id := range st.DeliveryIDs {
			if d := stored[id]; d != nil && d.Kind == ledger.KindDeliver && d.ParentTaskID == t.id {
				n++
			}
		}
		if n != planLen(t) || len(st.DeliveryIDs) != planLen(t) {
			c.add(t.kind, t.id, "delivery_count", "%d deliveries listed, %d exist, the plan has %d", len(st.DeliveryIDs), n, planLen(t))
		}
	}
	var approve200, reject200, withdraw200 []decisionCall
	lostToReject := false
	for _, cl := range calls {
		if cl.status != http.StatusOK && cl.status != http.StatusConflict {
			c.add(t.kind, t.id, "unexpected_decision_status", "%s (%s) answered %d %s", cl.verb, cl.variant, cl.status, cl.problem)
		}
		switch {
		case cl.variant == "stale":
			if cl.status != http.StatusConflict || cl.problem != "artifact-changed" {
				c.add(t.kind, t.id, "stale_hash_not_refused", "approve of a hash that is not the result answered %d %s", cl.status, cl.problem)
			}
			for _, d := range ds {
				if strings.Contains(d.IdempotencyKey, cl.sha) {
					c.add(t.kind, d.TaskID, "stale_hash_delivery", "a delivery keyed with the stale hash %.12s", cl.sha)
				}
			}
		case cl.status != http.StatusOK:
			if cl.verb == "approve" && cl.problem == "state-conflict" {
				lostToReject = true // lost, if a reject answered 200 (below)
			}
			if cl.verb == "withdraw" && cl.problem == "deliveries-started" {
				for _, d := range ds {
					if slices.Contains(st.WithdrawnDeliveryIDs, d.TaskID) {
						c.add(t.kind, t.id, "withdraw_refused_but_withdrawn", "withdraw answered 409 deliveries-started, yet %s was withdrawn", d.TaskID)
					}
				}
			}
		case cl.verb == "approve":
			approve200 = append(approve200, cl)
		case cl.verb == "reject":
			reject200 = append(reject200, cl)
		case cl.verb == "withdraw":
			withdraw200 = append(withdraw200, cl)
		}
	}
	for _, cl := range approve200 {
		if !approved {
			c.add(t.kind, t.id, "approve_200_not_approved", "approve (%s) answered 200, the task is %s (approval %s)", cl.variant, st.State, st.ApprovalState)
		}
	}
	// The task view lists the standing deliveries, then the withdrawn
	// ones: an answer of the standing round (the only one, or the approve
	// after a 200 withdraw) names exactly those; one of a withdrawn round
	// names deliveries that are now withdrawn.
	all := append(append([]string{}, st.DeliveryIDs...), st.WithdrawnDeliveryIDs...)
	if len(withdraw200) > 0 && len(st.WithdrawnDeliveryIDs) == 0 {
		c.add(t.kind, t.id, "withdrawn_but_not_recorded", "withdraw answered 200, the task has no withdrawn deliveries")
	}
	for _, cl := range approve200 {
		if !approved {
			break
		}
		if len(withdraw200) == 0 || cl.variant == "again" {
			if !slices.Equal(cl.deliveries, all) {
				c.add(t.kind, t.id, "approve_deliveries_differ", "approve (%s) answered deliveries %v, the task has %v", cl.variant, cl.deliveries, all)
			}
			continue
		}
		for _, id := range cl.deliveries {
			if !slices.Contains(st.WithdrawnDeliveryIDs, id) {
				c.add(t.kind, t.id, "approve_deliveries_differ", "approve (%s) of a withdrawn round answered delivery %s, which is not withdrawn", cl.variant, id)
			}
		}
	}
	for _, cl := range reject200 {
		if st.State != ledger.StateRejected {
			c.add(t.kind, t.id, "reject_200_not_rejected", "reject (%s) answered 200, the task is %s", cl.variant, st.State)
		}
	}
	if len(approve200) > 0 && len(reject200) > 0 {
		c.add(t.kind, t.id, "approve_and_reject_both_won", "%d approvals and %d rejections answered 200", len(approve200), len(reject200))
	}
	if !approved && lostToReject && len(reject200) > 0 {
		// (delivery() reports each such delivery by its parent's state;
		// this names the race.)
		for _, d := range ds {
			if !slices.Contains(st.WithdrawnDeliveryIDs, d.TaskID) {
				c.add(t.kind, d.TaskID, "race_lost_to_reject_has_deliveries", "delivery of %s, whose approval lost the race to a reject", t.id)
			}
		}
	}
}

// decisions counts the approvers' answered calls (the caller holds s.mu,
// and approvals released s.wf.mu).
func (c *checker) decisions() int {
	c.s.wf.mu.Lock()
	defer c.s.wf.mu.Unlock()
	n := 0
	for _, cs := range c.s.wf.calls {
		n += len(cs)
	}
	return n
}

// writeDecisions prints the approvers' line of the report.
func (r *Report) writeDecisions(w io.Writer) {
	if r.Decisions == 0 && r.Deliveries == 0 {
		return
	}
	keys := make([]string, 0, len(r.DecisionCalls))
	for k := range r.DecisionCalls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.DecisionCalls[k]))
	}
	fmt.Fprintf(w, "approvals: %d decisions answered, %d deliver tasks created; the decision handler's AWS calls (not in the figures above): %s\n",
		r.Decisions, r.Deliveries, strings.Join(parts, ", "))
}
