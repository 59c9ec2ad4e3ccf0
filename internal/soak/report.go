package soak

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// Row is one fault kind of the report.
type Row struct {
	Kind Kind
	// Tasks planned with this kind (0 for run-wide kinds).
	Tasks int
	// Injected counts the faults of this kind that actually happened.
	Injected int
	// States counts the final states of the kind's tasks; NotFinal those
	// still live after the drain.
	States   map[ledger.State]int
	NotFinal int
	// Unexpected counts final states outside the kind's expected ones
	// (informational: budgets may legitimately park a task).
	Unexpected int
	Violations int
	Note       string

	unexpectedIDs []string
}

// Report is the outcome of a soak run.
type Report struct {
	Backend    string
	Mode       Mode
	N          int
	Seed       int64
	Elapsed    time.Duration
	Rows       []Row
	Violations []Violation
	// Accepted tasks stored, Stored tasks in the table, Reviews task review items.
	Accepted, Stored, Reviews int
	// Refused are the quota caller's tasks refused with 429 (never
	// stored); Regenerates the chain_budget regenerates accepted (planned
	// beyond N). Accepted = N - Refused + Regenerates when nothing is lost.
	Refused, Regenerates int
	// Calls and Attempts of the handlers' AWS clients, by "Service.Operation".
	Calls, Attempts map[string]int
	// Decisions are the approvers' answered calls and DecisionCalls the
	// AWS calls of the handler serving them (not in Calls: a person's
	// decision is no part of a task's pipeline). Deliveries counts the
	// deliver tasks the approvals created.
	Decisions     int
	DecisionCalls map[string]int
	// DocumentReplayCalls are the AWS calls of the handler serving the
	// document kinds' deliberate repeats (the same submit again, another
	// version's upload and submit): not in Calls, like DecisionCalls — a
	// replay reads the item by design, and the GetItem budget is the
	// pipeline's.
	DocumentReplayCalls map[string]int
	Deliveries          int
	// FollowUps are the follow-up kinds' figures (check_followup.go).
	FollowUps FollowUpStats
	// PerTask is Calls divided by the accepted tasks.
	PerTask       map[string]float64
	ProviderCalls int
	SideEffects   int
	// Saves are successful result writes; FencedSaves rejected ones.
	Saves, FencedSaves         int
	PoisonToQueue, PoisonToDLQ int
	MaxToFinal                 time.Duration
	// Uncertain counts the tasks parked saying the provider may have
	// acted, by what the soak knows: Called (a call did start), Genuine
	// (none started, but the parked attempt's call-start mark was written
	// — the system cannot know, and the review says so). Parks with
	// neither are false_uncertainty violations.
	Uncertain  struct{ Called, Genuine int }
	Reconciler reconStats
	// Latency is p50 and p99 of the handlers' AWS calls by operation.
	Latency map[string][2]time.Duration
	Worker  batchStats
}

// OK reports whether no invariant was broken.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Under returns the fault kinds injected fewer than min times.
func (r *Report) Under(min int) []Kind {
	var out []Kind
	for _, row := range r.Rows {
		if row.Kind != KindNone && row.Injected < min {
			out = append(out, row.Kind)
		}
	}
	return out
}

// Row returns the row of kind k.
func (r *Report) Row(k Kind) Row {
	for _, row := range r.Rows {
		if row.Kind == k {
			return row
		}
	}
	return Row{Kind: k}
}

var finalStates = []ledger.State{ledger.StateCompleted, ledger.StateFailed, ledger.StateCancelled, ledger.StateRejected, ledger.StateNeedsReview}

// WriteTable prints the fault kind × injected × final states × violations
// table, the run's totals, and the first violations.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "soak: %d tasks on %s, provider mode %s, seed %d, %s; %d stored, %d review items\n\n",
		r.N, r.Backend, r.Mode, r.Seed, r.Elapsed.Round(time.Millisecond), r.Stored, r.Reviews)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault kind\ttasks\tinjected\tcompleted\tfailed\tcancelled\trejected\tneeds_review\tnot_final\tunexpected\tviolations\t")
	var tot Row
	tot.States = map[ledger.State]int{}
	dash := func(n int, show bool) string {
		if !show {
			return "-"
		}
		return fmt.Sprint(n)
	}
	for _, row := range r.Rows {
		perTask := row.Tasks > 0 || row.Kind == KindNone
		cells := []string{string(row.Kind), dash(row.Tasks, perTask), dash(row.Injected, row.Kind != KindNone)}
		for _, s := range finalStates {
			cells = append(cells, dash(row.States[s], perTask))
			tot.States[s] += row.States[s]
		}
		cells = append(cells, dash(row.NotFinal, perTask), dash(row.Unexpected, perTask), fmt.Sprint(row.Violations))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		tot.Tasks += row.Tasks
		tot.Injected += row.Injected
		tot.NotFinal += row.NotFinal
		tot.Unexpected += row.Unexpected
		tot.Violations += row.Violations
	}
	cells := []string{"total", fmt.Sprint(tot.Tasks), fmt.Sprint(tot.Injected)}
	for _, s := range finalStates {
		cells = append(cells, fmt.Sprint(tot.States[s]))
	}
	cells = append(cells, fmt.Sprint(tot.NotFinal), fmt.Sprint(tot.Unexpected), fmt.Sprint(tot.Violations))
	fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	_ = tw.Flush()

	fmt.Fprintln(w)
	for _, row := range r.Rows {
		if row.Note != "" {
			fmt.Fprintf(w, "  %-22s %s\n", row.Kind+":", row.Note)
		}
	}
	fmt.Fprintf(w, "\nuncertainty: %d parks saying the provider may have acted after a call started; %d genuine (the call-start mark written, no call started: a worker stopped between the two); every other such park is a false_uncertainty violation\n",
		r.Uncertain.Called, r.Uncertain.Genuine)
	fmt.Fprintf(w, "provider: %d calls, %d side effects; results: %d saved, %d stale writes fenced; slowest task to final: %s\n",
		r.ProviderCalls, r.SideEffects, r.Saves, r.FencedSaves, r.MaxToFinal.Round(time.Millisecond))
	fmt.Fprintf(w, "worker: %d batches, %d records, %d item failures, %d deleted, %d failed invocations\n",
		r.Worker.Batches, r.Worker.Records, r.Worker.ItemFailures, r.Worker.Deleted, r.Worker.Failed)
	fmt.Fprintf(w, "reconciler: %d runs, %d requeued, %d re-sent, %d to unknown, %d parked, %d completed by readback, %d poison, %d races lost, %d runs with errors, %d walks cut short by the run budget\n",
		r.Reconciler.Runs, r.Reconciler.Requeued, r.Reconciler.Resent, r.Reconciler.ExpiredToUnknown, r.Reconciler.Parked,
		r.Reconciler.Completed, r.Reconciler.Poison, r.Reconciler.Raced, r.Reconciler.Errors, r.Reconciler.Partial)
	keys := make([]string, 0, len(r.Calls))
	for k := range r.Calls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.Calls[k]))
	}
	fmt.Fprintf(w, "handler AWS calls: %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "handler AWS calls per accepted task (budget: SQS.SendMessage <= %.1f, DynamoDB.GetItem <= %.1f): %s\n",
		MaxSendPerTask, MaxGetPerTask, perTaskLine(r.PerTask))
	parts = parts[:0]
	for _, k := range keys {
		if q, ok := r.Latency[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %s/%s", k, q[0].Round(100*time.Microsecond), q[1].Round(100*time.Microsecond)))
		}
	}
	fmt.Fprintf(w, "handler AWS call latency p50/p99: %s\n", strings.Join(parts, ", "))
	r.writeDecisions(w)
	r.writeDocumentReplays(w)
	r.writeFollowUps(w)

	if len(r.Violations) == 0 {
		fmt.Fprintln(w, "\nviolations: none")
		return
	}
	fmt.Fprintf(w, "\nviolations: %d\n", len(r.Violations))
	byRule := map[string]int{}
	for _, v := range r.Violations {
		byRule[v.Rule]++
	}
	rules := make([]string, 0, len(byRule))
	for k := range byRule {
		rules = append(rules, k)
	}
	sort.Strings(rules)
	for _, k := range rules {
		fmt.Fprintf(w, "  %-36s %d\n", k, byRule[k])
	}
	for i, v := range r.Violations {
		if i == 30 {
			fmt.Fprintf(w, "  ... %d more\n", len(r.Violations)-30)
			break
		}
		fmt.Fprintf(w, "  %s\n", v)
	}
}

// writeFollowUps prints the follow-up kinds' line: acts per operation id
// and notifications per (task, event).
func (r *Report) writeFollowUps(w io.Writer) {
	f := r.FollowUps
	if f.PlanDeliveries == 0 && f.Notifications == 0 {
		return
	}
	emu := "not readable on this backend"
	if f.EmulatorSends >= 0 {
		emu = fmt.Sprint(f.EmulatorSends)
	}
	fmt.Fprintf(w, "follow-ups (not accepted tasks: their calls are their parents'): %d plan deliveries to lambda (%d deliver invokes, %d lookups, %d acts; at most %d act per operation id); %d email notifications (%d SendEmail, emulator recorded %s; %d parked unknown_outcome; at most %d per task and event)\n",
		f.PlanDeliveries, f.DeliverInvokes, f.Lookups, f.Acts, f.MaxActsPerOp, f.Notifications, f.Sends, emu, f.ParkedUnknown, f.MaxPerEvent)
}
