package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The invariants of follow-up tasks (followup.go). Each
// violation names its task and rule.
//
// Plan deliveries (plan_lambda, plan_lambda_lose_reply), to the example
// function, which records one item per operation id:
//
//   - plan_delivery_count: a completed task has exactly one delivery (its
//     plan's one entry), listed in its delivery_ids; a task that did not
//     complete has none;
//   - plan_delivery_key_mismatch, plan_delivery_payload_not_result: the
//     delivery is keyed approval:<task>:<result sha>:0 in the task's scope
//     and carries the saved result as its payload;
//   - duplicate_delivery_act: the function acted more than once for one
//     operation id (exactly one act per operation id);
//   - delivery_reinvoked_blind: a deliver invoke after an earlier one with
//     no lookup answering "not found" between (the function may have acted:
//     never repeated blind);
//   - completed_without_act, receipt_not_the_functions: a completed
//     delivery's receipt is the function's record of that operation;
//   - lost_reply_not_read_back: a delivery whose reply was lost completed
//     otherwise than by the lookup's readback;
//   - follow_up_not_final: a follow-up still live after the drain.
//
// Notifications (notify_completed, notify_lose_reply, notify_parked), by
// email through the emulator's SES:
//
//   - notification_count: exactly one notification per (task, event) that
//     happened — completed (keyed with the completing assignment version)
//     or parked;
//   - notification_of_event_not_happened: none for an event the task's
//     final state does not show;
//   - duplicate_notification_send: at most one SendEmail per notification;
//     notification_completed_without_send: a completed one was sent once;
//   - lost_notification_not_parked: a notification whose SendEmail reply
//     was lost is parked unknown_outcome (SES has no readback), after its
//     one send; false_uncertainty: unknown_outcome without a send;
//   - emulator_sends_differ: on kumo, the emulator's record of sent mail
//     names each notification's operation id exactly as many times as the
//     soak counted sends.
//
// It returns the ids of the follow-ups it checked (they are no
// "unknown_task").
func (c *checker) followUps(stored map[string]*ledger.Task, reviewOf map[string]*ledger.Review, emuSends map[string]int) map[string]bool {
	s := c.s
	seen := map[string]bool{}
	byParent := map[string][]*ledger.Task{}
	for id, d := range stored {
		if !isFollowUp(d) {
			continue
		}
		seen[id] = true
		byParent[d.ParentTaskID] = append(byParent[d.ParentTaskID], d)
		if d.State.Live() {
			k := KindNone
			if pt := s.byID[d.ParentTaskID]; pt != nil {
				k = pt.kind
			}
			c.add(k, id, "follow_up_not_final", "follow-up of %s is %s after the drain", d.ParentTaskID, d.State)
		}
	}
	for parent, ds := range byParent {
		if pt := s.byID[parent]; pt == nil || !isPlanLambda(pt.kind) && !isNotify(pt.kind) {
			c.add(KindNone, ds[0].TaskID, "follow_up_of_unplanned", "a follow-up of %s, which was planned for none", parent)
		}
	}
	st := &fuStats{}
	for _, t := range s.tasks {
		p := stored[t.id]
		if p == nil {
			continue
		}
		switch {
		case isPlanLambda(t.kind):
			c.planDelivery(t, p, byParent[t.id], reviewOf, st)
		case isNotify(t.kind):
			c.notifications(t, p, byParent[t.id], reviewOf, emuSends, st)
		}
	}
	c.fu = *st
	for _, k := range followUpKinds() {
		if r := c.rows[k]; r != nil {
			switch {
			case isPlanLambda(k):
				r.Note = fmt.Sprintf("lambda: %d deliveries, %d deliver invokes, %d lookups, %d acts", st.kind[k].followUps, st.kind[k].invokes, st.kind[k].lookups, st.kind[k].acts)
			default:
				r.Note = fmt.Sprintf("email: %d notifications, %d SendEmail", st.kind[k].followUps, st.kind[k].sends)
			}
		}
	}
	return seen
}

// fuStats are the follow-ups' figures (Report.FollowUps).
type fuStats struct {
	FollowUpStats
	kind map[Kind]*fuKindStats
}

type fuKindStats struct{ followUps, invokes, lookups, acts, sends int }

func (st *fuStats) of(k Kind) *fuKindStats {
	if st.kind == nil {
		st.kind = map[Kind]*fuKindStats{}
	}
	if st.kind[k] == nil {
		st.kind[k] = &fuKindStats{}
	}
	return st.kind[k]
}

// FollowUpStats are the follow-up kinds' figures.
type FollowUpStats struct {
	// PlanDeliveries are the deliver tasks plans created; DeliverInvokes,
	// Lookups and Acts what the example function saw and did;
	// MaxActsPerOp the most acts of one operation id.
	PlanDeliveries, DeliverInvokes, Lookups, Acts, MaxActsPerOp int
	// Notifications are the notification tasks; Sends the SendEmail calls
	// that reached the emulator; EmulatorSends the sent mail the emulator
	// recorded for them (-1: not readable on this backend);
	// MaxPerEvent the most notifications of one (task, event);
	// ParkedUnknown the notifications parked unknown_outcome.
	Notifications, Sends, EmulatorSends, MaxPerEvent, ParkedUnknown int
}

func isFollowUp(d *ledger.Task) bool {
	return d.Kind == ledger.KindDeliver && d.Provenance != nil &&
		(d.Provenance.Type == ledger.ProvenancePlan || d.Provenance.Type == ledger.ProvenanceNotification)
}

// planDelivery checks the plan delivery of task t (stored as p).
func (c *checker) planDelivery(t *task, p *ledger.Task, ds []*ledger.Task, reviewOf map[string]*ledger.Review, st *fuStats) {
	s := c.s
	ks := st.of(t.kind)
	if p.State != ledger.StateCompleted {
		if len(ds) > 0 {
			c.add(t.kind, t.id, "plan_delivery_count", "%s with %d deliveries; only a completion creates them", p.State, len(ds))
		}
		return
	}
	if len(ds) != 1 || len(p.DeliveryIDs) != 1 || p.DeliveryIDs[0] != ds[0].TaskID {
		c.add(t.kind, t.id, "plan_delivery_count", "%d deliveries exist, %d listed; the plan has 1", len(ds), len(p.DeliveryIDs))
		if len(ds) == 0 {
			return
		}
	}
	for _, d := range ds {
		ks.followUps++
		st.PlanDeliveries++
		if want := ledger.DeliveryKey(t.id, p.ResultSHA256, 0, 0); d.IdempotencyKey != want || d.Scope != p.Scope || d.Provenance.ArtifactSHA256 != p.ResultSHA256 {
			c.add(t.kind, d.TaskID, "plan_delivery_key_mismatch", "key %q scope %q artifact %.12s; want %q in %q for result %.12s", d.IdempotencyKey, d.Scope, d.Provenance.ArtifactSHA256, want, p.Scope, p.ResultSHA256)
		}
		var in struct {
			Payload json.RawMessage `json:"payload"`
		}
		got, err1 := api.CanonicalJSON([]byte(d.Input))
		if err1 == nil && json.Unmarshal(got, &in) == nil {
			got = in.Payload
		}
		want, err2 := api.CanonicalJSON([]byte(s.storedResult(p)))
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			c.add(t.kind, d.TaskID, "plan_delivery_payload_not_result", "the delivered payload is not the saved result of %s", t.id)
		}
		s.fu.mu.Lock()
		evs := append([]invokeEvent(nil), s.fu.invokes[d.TaskID]...)
		lost := s.fu.lost[d.TaskID]
		s.fu.mu.Unlock()
		acts, deliveries, provenAbsent := 0, 0, true
		for _, e := range evs {
			switch e.action {
			case "deliver":
				ks.invokes++
				st.DeliverInvokes++
				if deliveries > 0 && !provenAbsent {
					c.add(t.kind, d.TaskID, "delivery_reinvoked_blind", "deliver invoke %d with no lookup proving the earlier one absent", deliveries+1)
				}
				deliveries++
				provenAbsent = false
				if e.acted {
					acts++
				}
			case "lookup":
				ks.lookups++
				st.Lookups++
				provenAbsent = !e.found
			}
		}
		ks.acts += acts
		st.Acts += acts
		st.MaxActsPerOp = max(st.MaxActsPerOp, acts)
		if acts > 1 {
			c.add(t.kind, d.TaskID, "duplicate_delivery_act", "the function acted %d times for one operation id", acts)
		}
		switch d.State {
		case ledger.StateCompleted:
			rc, ok := deliver.ReceiptOf(d.Result)
			rec, found, _ := s.fu.store.Get(context.Background(), d.TaskID)
			switch {
			case acts != 1 || !found:
				c.add(t.kind, d.TaskID, "completed_without_act", "completed, but the function acted %d times (record found: %t)", acts, found)
			case !ok || rc.OperationID != d.TaskID || rc.ProviderRef != rec.Receipt || d.ProviderRef != rec.Receipt:
				c.add(t.kind, d.TaskID, "receipt_not_the_functions", "receipt %q is not the function's record %q", rc.ProviderRef, rec.Receipt)
			case lost && (d.ReadbackAt == "" || rc.ReadbackResult != destination.ReadbackFound):
				c.add(t.kind, d.TaskID, "lost_reply_not_read_back", "its reply was lost, yet it completed without the lookup's readback")
			}
		case ledger.StateNeedsReview:
			if r := reviewOf[d.TaskID]; (r != nil && r.Reason == ledger.ReviewUnknownOutcome || d.ReviewReason == ledger.ReviewUnknownOutcome) && deliveries == 0 {
				c.add(t.kind, d.TaskID, "false_uncertainty", "parked unknown_outcome, but the function was never invoked to deliver")
			}
		}
	}
}

// notifications checks the notifications of task t (stored as p).
func (c *checker) notifications(t *task, p *ledger.Task, ds []*ledger.Task, reviewOf map[string]*ledger.Review, emuSends map[string]int, st *fuStats) {
	s := c.s
	ks := st.of(t.kind)
	happened := map[string]bool{}
	switch p.State {
	case ledger.StateCompleted:
		happened[followup.EventCompleted] = true
	case ledger.StateNeedsReview:
		happened[followup.EventParked] = true
	case ledger.StateFailed:
		happened[followup.EventFailed] = true
	}
	perEvent := map[string]int{}
	for _, d := range ds {
		ks.followUps++
		st.Notifications++
		ev := d.Provenance.Event
		perEvent[ev]++
		if !happened[ev] {
			c.add(t.kind, d.TaskID, "notification_of_event_not_happened", "a %s notification of a task that is %s", ev, p.State)
		}
		if ev == followup.EventCompleted && d.IdempotencyKey != followup.Key(t.id, ev, p.AssignmentVersion, followup.EmailDestination) {
			c.add(t.kind, d.TaskID, "notification_count", "key %q is not the completion's at assignment %d", d.IdempotencyKey, p.AssignmentVersion)
		}
		s.fu.mu.Lock()
		sends, lost := s.fu.sends[d.TaskID], s.fu.lost[d.TaskID]
		s.fu.mu.Unlock()
		ks.sends += sends
		st.Sends += sends
		if emuSends != nil {
			st.EmulatorSends += emuSends[d.TaskID]
			if emuSends[d.TaskID] != sends {
				c.add(t.kind, d.TaskID, "emulator_sends_differ", "the emulator recorded %d mails of this notification, the soak counted %d sends", emuSends[d.TaskID], sends)
			}
		}
		if sends > 1 {
			c.add(t.kind, d.TaskID, "duplicate_notification_send", "%d SendEmail calls for one notification", sends)
		}
		reason := d.ReviewReason
		if r := reviewOf[d.TaskID]; r != nil {
			reason = r.Reason
		}
		switch {
		case d.State == ledger.StateCompleted && lost:
			c.add(t.kind, d.TaskID, "lost_notification_not_parked", "its SendEmail reply was lost, yet it completed (SES has no readback)")
		case d.State == ledger.StateCompleted && sends != 1:
			c.add(t.kind, d.TaskID, "notification_completed_without_send", "completed after %d sends", sends)
		case d.State == ledger.StateNeedsReview && reason == ledger.ReviewUnknownOutcome:
			st.ParkedUnknown++
			s.fu.mu.Lock()
			maybe := s.fu.maybeSent[d.TaskID]
			s.fu.mu.Unlock()
			switch {
			case sends > 0:
			case maybe > 0 || (d.CallStartedVersion > 0 && d.CallStartedVersion == d.AssignmentVersion):
				// A send that failed after its request may have left, or
				// a worker that stopped between the call-start mark and
				// the send: unknowable, so the park is genuine.
				c.uncertain.Genuine++
			default:
				c.add(t.kind, d.TaskID, "false_uncertainty", "parked unknown_outcome, but nothing was sent")
			}
		case lost:
			c.add(t.kind, d.TaskID, "lost_notification_not_parked", "its SendEmail reply was lost; it is %s (%s), not parked unknown_outcome", d.State, reason)
		}
	}
	for ev := range happened {
		if perEvent[ev] != 1 {
			c.add(t.kind, t.id, "notification_count", "%d notifications of %s; want exactly one", perEvent[ev], ev)
		}
	}
	for ev, n := range perEvent {
		st.MaxPerEvent = max(st.MaxPerEvent, n)
		if !happened[ev] && n > 1 {
			c.add(t.kind, t.id, "notification_count", "%d notifications of %s", n, ev)
		}
	}
}

// emulatorSends reads the mail kumo recorded as sent and counts, per
// notification operation id the soak saw, the messages naming it (the
// email destination writes the operation id into the body). nil when the
// backend keeps no such record the soak can read.
func (s *soak) emulatorSends(ctx context.Context) map[string]int {
	sent, ok := s.sentMail(ctx)
	if !ok {
		return nil
	}
	// Only this run's: an emulator serves several runs (the command's
	// modes), and with one seed their operation ids repeat.
	sent = sent[min(s.fu.mailBefore, len(sent)):]
	s.fu.mu.Lock()
	ops := make([]string, 0, len(s.fu.parent))
	for op := range s.fu.parent {
		ops = append(ops, op)
	}
	s.fu.mu.Unlock()
	out := map[string]int{}
	for _, body := range sent {
		for _, op := range ops {
			if op != "" && strings.Contains(body, op) {
				out[op]++
			}
		}
	}
	return out
}

// sentMail reads the bodies of the mail kumo recorded as sent, in order;
// false when the backend keeps no such record the soak can read.
func (s *soak) sentMail(ctx context.Context) ([]string, bool) {
	if s.env.Backend != "kumo" || s.env.AWS.BaseEndpoint == nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(aws.ToString(s.env.AWS.BaseEndpoint), "/")+"/kumo/ses/v2/sent-emails", nil)
	if err != nil {
		return nil, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		SentEmails []struct{ Body string }
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil {
		return nil, false
	}
	out := make([]string, len(r.SentEmails))
	for i, m := range r.SentEmails {
		out[i] = m.Body
	}
	return out, true
}
