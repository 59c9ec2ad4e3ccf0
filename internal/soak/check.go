package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// Violation is one broken invariant.
type Violation struct {
	Kind   Kind   // the task's planned kind, or a run-wide kind
	TaskID string // the task or review item concerned
	Rule   string // a stable name, e.g. "two_saved_results"
	Detail string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %s [%s]: %s", v.Rule, v.TaskID, v.Kind, v.Detail)
}

type checker struct {
	s          *soak
	rows       map[Kind]*Row
	violations []Violation
	spendRows  map[Kind]*spendRowStats // check_spend.go
	uncertain  struct{ Called, Genuine int }
	fu         fuStats                  // check_followup.go
	stream     map[Kind]*streamRowStats // check_stream.go
}

func (c *checker) add(k Kind, id, rule, format string, args ...any) {
	c.violations = append(c.violations, Violation{Kind: k, TaskID: id, Rule: rule, Detail: fmt.Sprintf(format, args...)})
	c.row(k).Violations++
}

func (c *checker) row(k Kind) *Row {
	r := c.rows[k]
	if r == nil {
		r = &Row{Kind: k, States: map[ledger.State]int{}}
		c.rows[k] = r
	}
	return r
}

// check reads the tables and the provider's ledger and builds the report.
func (s *soak) check(ctx context.Context, elapsed time.Duration) (*Report, error) {
	tasks, err := s.scanTasks(ctx)
	if err != nil {
		return nil, err
	}
	reviews, err := s.scanReviews(ctx)
	if err != nil {
		return nil, err
	}
	stored := make(map[string]*ledger.Task, len(tasks))
	for i := range tasks {
		stored[tasks[i].TaskID] = &tasks[i]
	}
	reviewOf := make(map[string]*ledger.Review, len(reviews))
	for i := range reviews {
		reviewOf[reviews[i].TaskID] = &reviews[i]
	}

	emuSends := s.emulatorSends(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &checker{s: s, rows: map[Kind]*Row{}}
	rep := &Report{
		Backend: s.env.Backend, Mode: s.cfg.Mode, N: s.cfg.N, Seed: s.cfg.Seed, Elapsed: elapsed,
		Calls: s.counter.Calls(), Attempts: s.counter.Attempts(),
		ProviderCalls: s.provCalls, SideEffects: s.prov.TotalSideEffects(),
		Reconciler: s.recon, Worker: s.batches, Stored: len(tasks), Latency: s.lat.quantiles(),
	}
	for _, t := range s.tasks {
		row := c.row(t.kind)
		row.Tasks++
		st := stored[t.id]
		if st == nil && s.expired[t.id] != nil {
			// A ttl_expired task whose item the emulator's TTL sweeper
			// deleted (kumo does, as DynamoDB eventually would) after the
			// resubmit: only the resubmit's answer can be checked.
			rep.Accepted++
			row.States[s.expired[t.id].State]++
			c.expiredKey(t, nil)
			continue
		}
		c.checkSubmit(t, st)
		c.spendTask(ctx, t, st, reviewOf[t.id])
		if st == nil {
			continue
		}
		rep.Accepted++
		final := st.State.Terminal() || st.State == ledger.StateNeedsReview
		if !final {
			row.NotFinal++
			c.add(t.kind, t.id, "not_final", "state %s after the drain", st.State)
		} else {
			row.States[st.State]++
			if !slices.Contains(expected(t), st.State) {
				row.Unexpected++
				if len(row.unexpectedIDs) < 3 {
					row.unexpectedIDs = append(row.unexpectedIDs, fmt.Sprintf("%s→%s(%s)", t.id, st.State, st.ReviewReason+st.ErrorClass))
				}
			}
			endMs := st.UpdatedMs
			if ts, err := time.Parse(time.RFC3339Nano, st.CompletedAt); err == nil && st.State == ledger.StateCompleted {
				endMs = ts.UnixMilli()
			}
			took := time.Duration(endMs-st.CreatedMs) * time.Millisecond
			rep.MaxToFinal = max(rep.MaxToFinal, took)
			if by := s.finalBy(time.UnixMilli(st.DeadlineMs)); time.UnixMilli(endMs).After(by) {
				over := time.Duration(endMs-st.DeadlineMs) * time.Millisecond
				allowed := by.Sub(time.UnixMilli(st.DeadlineMs)).Round(time.Millisecond)
				c.add(t.kind, t.id, "final_too_late", "final %s after its age budget ended (allowed: until the end of the second complete reconciler walk that started after it, %s)", over, allowed)
			}
		}
		// One generation per task, two for a ttl_expired task whose key
		// got a fresh task after its first one expired.
		gens, fresh := 1, false
		if old := s.expired[t.id]; old != nil && st.CreatedMs > old.CreatedMs {
			gens, fresh = 2, true
		}
		// At most one saved result per generation, and a completed one is
		// the provider's.
		saves, fencedSaves := s.saves[t.id], s.fencedSav[t.id]
		rep.Saves += saves
		rep.FencedSaves += fencedSaves
		if saves > gens {
			c.add(t.kind, t.id, "two_saved_results", "%d result writes succeeded", saves)
		}
		if isDeliver(t.kind) {
			c.delivery(t, st, reviewOf[t.id], saves, gens)
		} else {
			effects := s.prov.SideEffects(t.id)
			if effects > gens {
				c.add(t.kind, t.id, "duplicate_side_effect", "%d provider side effects for one task (provider %s)", effects, s.cfg.Mode)
			}
			if st.State == ledger.StateCompleted {
				switch {
				case saves > gens || saves+s.maybeSav[t.id] < gens:
					c.add(t.kind, t.id, "completed_without_one_save", "completed with %d result writes seen (%d more without an answer)", saves, s.maybeSav[t.id])
				case effects < 1:
					c.add(t.kind, t.id, "result_without_side_effect", "completed but the provider performed %d generations", effects)
				case !s.providersResult(t.id, st) && (st.ResultRef != nil || !s.oversized(t.id)):
					// (An oversized result saved inline is its own rule: moto
					// applies such a write, then answers an error. One saved
					// through the claim-check is compared like any other.)
					c.add(t.kind, t.id, "result_not_the_providers", "the saved result or provider_ref differs from the provider's record")
				}
			} else if st.HasResult() && st.State != ledger.StateRejected {
				c.add(t.kind, t.id, "result_on_unfinished_task", "state %s carries a result", st.State)
			}
		}
		c.claimCheck(t, st)
		c.document(t, st)
		if isStream(t.kind) {
			c.streamed(t, st)
		}
		if st.Attempts > st.MaxAttempts {
			c.add(t.kind, t.id, "attempts_over_budget", "attempts %d > max_attempts %d", st.Attempts, st.MaxAttempts)
		}
		if !isDeliver(t.kind) {
			c.unforgiving(t, st, reviewOf[t.id], fresh)
		}
		if st.State == ledger.StateNeedsReview {
			r := reviewOf[t.id]
			switch {
			case r == nil:
				c.add(t.kind, t.id, "parked_without_review", "needs_review without a review item")
			case r.ReviewStatus != ledger.ReviewOpen:
				c.add(t.kind, t.id, "parked_review_not_open", "review item is %q", r.ReviewStatus)
			case r.Reason == "":
				c.add(t.kind, t.id, "review_without_reason", "open review item has no reason")
			}
		}
	}
	deliveries := c.approvals(stored)
	rep.Deliveries = len(deliveries)
	followUps := c.followUps(stored, reviewOf, emuSends)
	rep.FollowUps = c.fu.FollowUpStats
	if emuSends == nil {
		rep.FollowUps.EmulatorSends = -1
	}
	rep.Decisions, rep.DecisionCalls = c.decisions(), s.deciderCalls.Calls()
	rep.DocumentReplayCalls = s.docReplayCalls.Calls()
	for id := range stored {
		if s.byID[id] == nil && !deliveries[id] && !followUps[id] {
			c.add(KindNone, id, "unknown_task", "a task no caller submitted")
		}
	}
	poisonSent := map[string]bool{}
	for _, m := range s.poison {
		poisonSent[ledger.PoisonID(m.id)] = true
		if m.queue == "task" {
			rep.PoisonToQueue++
		} else {
			rep.PoisonToDLQ++
		}
		r := reviewOf[ledger.PoisonID(m.id)]
		switch {
		case r == nil:
			c.add(PoisonMessage, ledger.PoisonID(m.id), "poison_not_recorded", "poison message sent to the %s queue has no review item", m.queue)
		case r.Reason != ledger.ReviewPoisonMessage || r.ReviewStatus != ledger.ReviewOpen:
			c.add(PoisonMessage, r.TaskID, "poison_review_wrong", "reason %q status %q", r.Reason, r.ReviewStatus)
		}
	}
	for _, r := range reviews {
		if strings.HasPrefix(r.TaskID, "msg_") {
			if !poisonSent[r.TaskID] {
				c.add(PoisonMessage, r.TaskID, "unexpected_poison_item", "a message the run did not send as poison was recorded as poison")
			}
			continue
		}
		rep.Reviews++
		t := stored[r.TaskID]
		k := KindNone
		if pt := s.byID[r.TaskID]; pt != nil {
			k = pt.kind
		}
		switch {
		case t == nil:
			c.add(k, r.TaskID, "review_without_task", "review item (%s) for a task that does not exist", r.Reason)
		case r.ReviewStatus == ledger.ReviewOpen && t.State != ledger.StateNeedsReview:
			c.add(k, r.TaskID, "open_review_for_unparked_task", "open review item (%s) but the task is %s", r.Reason, t.State)
		}
	}

	c.perTask(rep)
	c.spendRunWide(rep)
	rep.Uncertain = c.uncertain

	// Rows: injected counts and run-wide notes.
	for _, k := range AllKinds() {
		c.row(k).Injected = s.injected[k]
	}
	c.row(KindNone)
	c.row(ReconcilerRace).Note = fmt.Sprintf("%d ticks, %d runs, %d raced writes lost harmlessly, %d run errors", s.ticks, s.recon.Runs, s.recon.Raced, s.recon.Errors)
	c.row(PoisonMessage).Note = fmt.Sprintf("%d to the task queue, %d to the DLQ", rep.PoisonToQueue, rep.PoisonToDLQ)
	c.row(StaleWorker).Note = fmt.Sprintf("%d stale result writes fenced in all; %d takeovers by the pause's reconcile of the task", rep.FencedSaves, s.staleTakeovers)
	var bg []string
	for _, n := range s.inj.Injected() {
		if n.N > 0 {
			bg = append(bg, fmt.Sprintf("%s %s.%s×%d", n.Kind, n.Service, n.Operation, n.N))
		}
	}
	c.row(BackgroundAWS).Note = "all AWS faults: " + strings.Join(bg, ", ")
	c.row(QueueBacklog).Note = fmt.Sprintf("%d windows of %s without consumers; injected = tasks accepted inside one", s.backlogWindows, s.cfg.BacklogPause)
	for k, notes := range s.notes {
		r := c.row(k)
		r.Note = strings.TrimPrefix(r.Note+"; "+strings.Join(notes, "; "), "; ")
	}
	for _, k := range append([]Kind{KindNone}, AllKinds()...) {
		r := c.row(k)
		if len(r.unexpectedIDs) > 0 {
			r.Note = strings.TrimPrefix(r.Note+"; unexpected: "+strings.Join(r.unexpectedIDs, ", "), "; ")
		}
		rep.Rows = append(rep.Rows, *r)
	}
	rep.Violations = c.violations
	return rep, nil
}

// checkSubmit verifies what the callers of t saw against what is stored.
func (c *checker) checkSubmit(t *task, st *ledger.Task) {
	rec := c.s.records[t.id]
	rec.mu.Lock()
	defer rec.mu.Unlock()
	accepts := 0
	for _, cl := range rec.calls {
		if cl.variant == variantTTL {
			continue // a fresh task after the first expired: checked by expiredKey
		}
		if cl.variant == "cancel" {
			if cl.status != 200 && cl.status != 202 && cl.status != 409 && cl.status != 503 {
				c.add(t.kind, t.id, "unexpected_status", "cancel answered %d", cl.status)
			}
			continue
		}
		switch cl.status {
		case 200, 202, 422, 503:
		case 429: // the quota caller over its quota (check_spend.go)
			if t.kind != QuotaExceeded {
				c.add(t.kind, t.id, "unexpected_status", "submit (%s) answered %d", cl.variant, cl.status)
			}
		default:
			c.add(t.kind, t.id, "unexpected_status", "submit (%s) answered %d", cl.variant, cl.status)
		}
		if cl.status == 202 {
			accepts++
		}
		if cl.status/100 == 2 && cl.taskID != t.id {
			c.add(t.kind, t.id, "wrong_task_id", "submit (%s) answered task %q", cl.variant, cl.taskID)
		}
	}
	if accepts > 1 {
		c.add(t.kind, t.id, "accepted_twice", "%d callers of one key got 202", accepts)
	}
	var acceptedInputs []string
	for variant, cl := range rec.finals {
		if variant == "cancel" {
			continue
		}
		switch {
		case cl.status/100 == 2:
			acceptedInputs = append(acceptedInputs, rec.inputs[variant])
		case cl.status == 422 && t.kind != KeyReusedPayload && !isDocument(t.kind): // documents: check_document.go
			c.add(t.kind, t.id, "unexpected_422", "caller %s got 422 with the key's only payload", variant)
		case cl.status >= 500 && st != nil:
			c.add(t.kind, t.id, "stored_but_caller_left_with_5xx", "caller %s gave up after %d tries with %d, yet the task is stored", variant, maxSubmitTries, cl.status)
		}
	}
	if st == nil {
		if len(acceptedInputs) > 0 {
			c.add(t.kind, t.id, "accepted_task_lost", "a caller got 2xx but the task is not stored")
		}
		return
	}
	if len(acceptedInputs) == 0 {
		c.add(t.kind, t.id, "stored_without_acceptance", "the task is stored but no caller got 2xx")
	}
	stored := c.s.storedInput(st)
	for _, in := range acceptedInputs {
		if !sameJSON(in, stored) {
			c.add(t.kind, t.id, "stored_payload_not_accepted", "a caller got 2xx for a payload other than the stored one")
		}
	}
	first := func(variant string) []call {
		var out []call
		for _, cl := range rec.calls {
			if cl.variant == variant {
				out = append(out, cl)
			}
		}
		return out
	}
	switch t.kind {
	case DDBPutLostReply:
		// The put's reply is lost (503), the caller retries: its key finds
		// the stored task (200, replayed). A retry may itself meet a
		// background fault and answer 503 again; what must never happen is
		// a second create (202) or giving up.
		calls := first("a")
		ok := len(calls) >= 2 && calls[0].status == 503
		for i := 1; ok && i < len(calls)-1; i++ {
			ok = calls[i].status == 503
		}
		if last := len(calls) - 1; !ok || calls[last].status != 200 || !calls[last].replayed {
			c.add(t.kind, t.id, "lost_put_not_found_by_key", "after the put whose reply was lost the caller saw %v, want 503, then 200 replayed (503s between: retried)", statuses(calls))
		}
	case DuplicateSubmit:
		if d, ok := rec.finals["dup"]; ok && (d.status != 200 || !d.replayed) {
			c.add(t.kind, t.id, "replay_not_200", "the repeated submit answered %d (replayed %t)", d.status, d.replayed)
		}
	case KeyReusedPayload:
		a, okA := rec.finals["a"]
		b, okB := rec.finals["b"]
		if okA && okB {
			ok2xx := (a.status/100 == 2) != (b.status/100 == 2)
			ok422 := a.status == 422 || b.status == 422
			if !ok2xx || !ok422 {
				c.add(t.kind, t.id, "key_reuse_not_rejected", "the two payloads of one key got %d and %d; want one 2xx and one 422", a.status, b.status)
			}
		}
	case CancelRace:
		if cl, ok := rec.finals["cancel"]; ok {
			// 200: cancelled while queued; 202: cancel requested while
			// running — cancelled, or completed from a readback (the
			// provider had acted), or parked unknown_outcome; 409: too late.
			consistent := true
			switch cl.status {
			case 200:
				consistent = st.State == ledger.StateCancelled
			case 202:
				consistent = st.State == ledger.StateCancelled || st.State == ledger.StateCompleted ||
					(st.State == ledger.StateNeedsReview && st.ReviewReason == ledger.ReviewUnknownOutcome)
			case 409:
				consistent = st.State != ledger.StateCancelled
			}
			if !consistent {
				c.add(t.kind, t.id, "cancel_inconsistent", "cancel answered %d, task ended %s (%s)", cl.status, st.State, st.ReviewReason)
			}
		}
	}
}

func statuses(cs []call) []int {
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = c.status
	}
	return out
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}
