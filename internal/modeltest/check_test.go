package modeltest

import (
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"pgregory.net/rapid"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// check asserts DESIGN §1 on every accepted task, after every step.
func (m *model) check(rt *rapid.T) {
	tasks, reviews := m.snapshot(rt)
	watched := m.watched(rt)
	for _, t := range m.tasks {
		st := tasks[t.id]
		if st == nil {
			rt.Fatalf("nothing lost: accepted task %s is gone", t.id)
		}
		var rv *ledger.Review
		if st.State == ledger.StateNeedsReview {
			rv = reviews[t.id]
		}
		m.leaseEnd[t.id] = max(m.leaseEnd[t.id], st.LeaseUntil)
		if why := m.violation(t, st, rv, watched[t.id]); why != "" {
			rt.Fatalf("%s: %s", t.id, why)
		}
	}
}

// snapshot reads both tables whole (consistent scans: a run's tables hold
// a few items).
func (m *model) snapshot(rt *rapid.T) (map[string]*ledger.Task, map[string]*ledger.Review) {
	tasks, reviews := map[string]*ledger.Task{}, map[string]*ledger.Review{}
	for _, table := range []string{m.s.names.TasksTable, m.s.names.ReviewTable} {
		p := dynamodb.NewScanPaginator(m.s.env.DDB, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		for p.HasMorePages() {
			page, err := p.NextPage(m.ctx)
			if err != nil {
				rt.Fatalf("scan %s: %v", table, err)
			}
			for _, item := range page.Items {
				if table == m.s.names.TasksTable {
					var t ledger.Task
					if err := attributevalue.UnmarshalMap(item, &t); err != nil {
						rt.Fatalf("task item: %v", err)
					}
					tasks[t.TaskID] = &t
				} else {
					var r ledger.Review
					if err := attributevalue.UnmarshalMap(item, &r); err != nil {
						rt.Fatalf("review item: %v", err)
					}
					reviews[r.TaskID] = &r
				}
			}
		}
	}
	return tasks, reviews
}

// watched returns the tasks with a watch item the reconciler has not
// read yet (its sk past its shard's cursor; pkg/ledger/watch.go): their
// next run finds them there (a consistent scan: a run's table holds a few
// items).
func (m *model) watched(rt *rapid.T) map[string]bool {
	cursors, items := map[string]string{}, map[string][]map[string]string{}
	p := dynamodb.NewScanPaginator(m.s.env.DDB, &dynamodb.ScanInput{TableName: aws.String(m.s.names.WatchTable), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(m.ctx)
		if err != nil {
			rt.Fatalf("scan %s: %v", m.s.names.WatchTable, err)
		}
		for _, item := range page.Items {
			var w map[string]string
			if err := attributevalue.UnmarshalMap(item, &w); err != nil {
				rt.Fatalf("watch item: %v", err)
			}
			if w["pk"] == ledger.CursorPK {
				cursors[w["sk"]] = w["at"]
			} else {
				items[strings.TrimPrefix(w["pk"], ledger.WatchPrefix)] = append(items[strings.TrimPrefix(w["pk"], ledger.WatchPrefix)], w)
			}
		}
	}
	out := map[string]bool{}
	for shard, ws := range items {
		for _, w := range ws {
			out[w["task_id"]] = out[w["task_id"]] || w["sk"] > cursors[shard]
		}
	}
	return out
}

// violation returns the first broken rule for one task, or "" (watched:
// it has a watch item not yet read).
func (m *model) violation(t *task, st *ledger.Task, rv *ledger.Review, watched bool) string {
	epoch, since := m.s.epochSince(t.id)
	calls, lookups := m.s.rec.of(t.id)

	// At most one saved result per task (per run an operator started).
	if n := m.s.savesIn(t.id, epoch); n > 1 {
		return "at most one saved result: " + itoa(n) + " results saved"
	}

	// An effect without idempotency is started at most once: at most one
	// call acted, and no call started after one whose outcome its caller
	// could not know (anything but a refusal in so many words), unless a
	// readback found nothing in between.
	// Retries are bounded: one call per attempt at most.
	n, acted := 0, 0 // calls of this run, and those that acted
	for _, c := range calls {
		if c.epoch == epoch {
			n++
		}
		if c.epoch == epoch && c.performed {
			acted++
		}
	}
	if n > maxAttempts {
		return "retries are bounded: " + itoa(n) + " calls for " + itoa(maxAttempts) + " attempts"
	}

	effect := t.parent != "" || !m.s.retrySafe
	if m.s.mode != modeIdem && effect {
		if acted > 1 {
			return "effect started at most once: " + itoa(acted) + " side effects (" + string(m.s.mode) + ")"
		}
		for i, c := range calls {
			if c.epoch != epoch {
				continue
			}
			for _, e := range calls[:i] {
				if e.epoch != epoch || (e.end != 0 && e.end < c.start && e.refused) {
					continue
				}
				if e.cut || e.end == 0 && m.s.clock.Now().Sub(e.began) > callTimeout {
					// Held before it was sent past the call timeout (only a
					// call_before pause leaves a call open): the harness
					// cuts it unsent (errCut), and it never acts.
					continue
				}
				cleared := false
				for _, l := range lookups {
					cleared = cleared || (l.notFound && e.end != 0 && l.at > e.end && l.at < c.start)
				}
				if !cleared {
					return "effect started at most once: a call started after an earlier call of uncertain outcome (" + string(m.s.mode) + ")"
				}
			}
		}
	}

	// Nothing lost: live with a due time or a message, or final.
	switch {
	case st.State.Live():
		held := m.paused != nil && m.paused.task == t.id
		if (st.StateShard == "" || st.DueAt == 0) && !m.s.queue.has(t.id) && !held && !watched {
			return "nothing lost: live (" + string(st.State) + ") with neither a due time, a message nor an unread watch item"
		}
	case st.State == ledger.StateNeedsReview:
		if rv == nil || rv.ReviewStatus != ledger.ReviewOpen || rv.Reason == "" || rv.Summary == "" || rv.Reason != st.ReviewReason {
			return "nothing final without a reason: parked (" + st.ReviewReason + ") without its open review item"
		}
	}

	// Nothing final without a reason.
	switch st.State {
	case ledger.StateCompleted:
		if (st.Result == "" && st.ResultRef == nil) || st.CompletedAt == "" {
			return "nothing final without a reason: completed without a result"
		}
		if st.ApprovalRequired && st.ApprovalState != ledger.ApprovalApproved {
			return "nothing final without a reason: completed without the approval it requires (" + st.ApprovalState + ")"
		}
	case ledger.StateFailed:
		if st.ErrorClass == "" {
			return "nothing final without a reason: failed without an error class"
		}
	case ledger.StateCancelled:
		parent := m.byID[t.parent]
		if !t.cancelAsked && !t.withdrawn && (parent == nil || !parent.cancelAsked) {
			return "nothing final without a reason: cancelled, but no cancel or withdraw asked for it"
		}
	case ledger.StateRejected:
		return "nothing final without a reason: rejected, but nobody rejected it"
	}

	// No review claims a call that never started, and a retry-safe
	// generation is never parked for a person to weigh a duplicate.
	if rv != nil && m.s.retrySafe && t.parent == "" && (rv.Reason == ledger.ReviewUnknownOutcome || saysMayHaveActed(rv)) {
		return "retry-safe generation parked " + rv.Reason + " saying the provider may have acted"
	}
	if rv != nil && (rv.Reason == ledger.ReviewUnknownOutcome || saysMayHaveActed(rv)) {
		// A call-start mark is the worker's word that its call may start
		// (it is written right before the call): a worker held between the
		// two (a pause at write_after mark) may still call.
		started := st.CallStartedVersion > 0
		for _, c := range calls {
			started = started || c.epoch == epoch || c.end == 0 || c.end > since
		}
		// Unknowable, not false: a provider that deduplicates is never
		// marked before a call (DESIGN §14), so only its readback can say
		// that no call was made — and the last one failed, or found
		// nothing while a call of the fenced assignment could still reach
		// the provider (parked before its lease's end plus the call
		// timeout: the worker may be alive with its renewals failing).
		unknowable := false
		if last := len(lookups) - 1; m.s.mode == modeIdem && last >= 0 {
			parked, err := time.Parse(time.RFC3339Nano, rv.DeadLetteredAt)
			unknowable = lookups[last].failed ||
				lookups[last].notFound && err == nil && parked.UnixMilli() < m.leaseEnd[t.id]+callTimeout.Milliseconds()
		}
		if !started && !unknowable {
			return "false uncertainty: review " + rv.Reason + " says the call may have acted, but no call started"
		}
	}

	// No false certainty: a review that says nothing was generated has no
	// call of its run behind it that acted.
	if acted > 0 && rv != nil && strings.Contains(rv.Summary+"\n"+strings.Join(rv.Known, "\n"), "nothing was generated") {
		return "false certainty: review " + rv.Reason + " says nothing was generated, but a call acted"
	}

	// No silent uncertainty: a budget_exhausted review of a run in which a
	// call acted (and nothing was saved, or the task would not be parked
	// for its budget) says the provider may have acted. A retry-safe
	// generation's review says instead that its calls are not marked.
	if acted > 0 && rv != nil && rv.Reason == ledger.ReviewBudgetExhausted && effect && !saysMayHaveActed(rv) {
		return "silent uncertainty: review " + rv.Reason + " does not say the provider may have acted, but a call of its run did"
	}
	return ""
}

func saysMayHaveActed(r *ledger.Review) bool {
	return strings.Contains(strings.ToLower(r.Summary+"\n"+strings.Join(r.Uncertain, "\n")), "may have")
}

func itoa(n int) string { return strconv.Itoa(n) }
