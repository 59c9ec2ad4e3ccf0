package ledger_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/pkg/ledger"
)

const statesDoc = "../../docs/states.md"

// TestStatesDocIsCurrent: docs/states.md is rendered from the transition
// table, so the document a newcomer reads is the table the ledger runs.
// It fails when the file differs from a fresh rendering; record a change
// with
//
//	go test ./pkg/ledger -run TestStatesDocIsCurrent -update
func TestStatesDocIsCurrent(t *testing.T) {
	t.Parallel()
	got := renderStates(ledger.Transitions())
	if *updateGolden {
		if err := os.WriteFile(statesDoc, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(statesDoc)
	if err != nil {
		t.Fatalf("%v (write it with -update)", err)
	}
	if d := lineDiff(string(want), got); string(want) != got {
		t.Errorf("%s is stale: the transition table changed (record it with -update and review the diff):\n%s", statesDoc, d)
	}
}

// stateMeaning says what each state means, for the document's first table.
var stateMeaning = map[ledger.State]string{
	ledger.StateQueued:           "waiting for a worker's claim; due_at is the outbox's dispatch deadline",
	ledger.StateRunning:          "a worker holds the assignment (assignment_version) under a lease it renews",
	ledger.StateRetryWait:        "waiting until not_before for the next attempt",
	ledger.StateUnknown:          "the attempt's outcome is uncertain: read back, settled by its worker, or parked",
	ledger.StateAwaitingApproval: "the result is saved and waits for an approver until the approval deadline",
	ledger.StateCompleted:        "the result is saved (a gated task: approved)",
	ledger.StateFailed:           "refused for its input, or failed by an operator",
	ledger.StateCancelled:        "cancelled by its requester (or its approval withdrawn, for a delivery)",
	ledger.StateRejected:         "an approver rejected the result",
	ledger.StateNeedsReview:      "parked with an open review item: a person decides next",
}

var allStates = []ledger.State{
	ledger.StateQueued, ledger.StateRunning, ledger.StateRetryWait, ledger.StateUnknown, ledger.StateAwaitingApproval,
	ledger.StateNeedsReview, ledger.StateCompleted, ledger.StateFailed, ledger.StateCancelled, ledger.StateRejected,
}

func stateKind(s ledger.State) string {
	switch {
	case s.Live():
		return "live (indexed in by_state for the reconciler)"
	case s.Terminal():
		return "terminal (expires_at set for TTL)"
	}
	return "parked (not indexed)"
}

// guardNames lists a row's guards in words, without the fence and the
// from-states (their own columns); from a given state, with that state's
// own guards.
func guardNames(tr ledger.Transition, from ledger.State) []string {
	var out []string
	for _, g := range tr.Guards {
		if g.Name != "fence" && g.Name != "from" {
			out = append(out, g.Name)
		}
	}
	for _, g := range tr.When[from] {
		out = append(out, g.Name)
	}
	return out
}

func fromColumn(tr ledger.Transition) string {
	if len(tr.From) == 0 {
		return "—"
	}
	var out []string
	for _, s := range tr.From {
		c := "`" + string(s) + "`"
		if len(tr.When[s]) > 0 {
			c += " (" + strings.Join(guardNames(ledger.Transition{When: tr.When}, s), ", ") + ")"
		}
		out = append(out, c)
	}
	return strings.Join(out, ", ")
}

func toColumn(tr ledger.Transition) string {
	switch {
	case tr.To != "":
		return "`" + string(tr.To) + "`"
	case len(tr.From) > 0:
		return "(unchanged)"
	}
	return "—"
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func counters(tr ledger.Transition) string {
	var out []string
	if tr.Attempts != ledger.Same {
		out = append(out, "attempts "+string(tr.Attempts))
	}
	if tr.Version != ledger.Same {
		out = append(out, "version "+string(tr.Version))
	}
	return orDash(strings.Join(out, ", "))
}

func actorsOf(tr ledger.Transition) string {
	var out []string
	for _, a := range tr.Actors {
		out = append(out, string(a))
	}
	return strings.Join(out, ", ")
}

func renderStates(trs []ledger.Transition) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("# Task states and transitions")
	p("")
	p("<!-- Generated from pkg/ledger's transition table (ledger.Transitions, pkg/ledger/table.go) by")
	p("     go test ./pkg/ledger -run TestStatesDocIsCurrent -update")
	p("     Do not edit by hand: change the table, then regenerate. -->")
	p("")
	p("Every write of a task item is one row of the table in `pkg/ledger/table.go`. A row's DynamoDB")
	p("condition is built from its guards, and the Go predicates that explain a refusal ask the same")
	p("guards; `pkg/ledger/testdata/conditions.golden` pins every condition the ledger sends, and")
	p("TestEveryTransitionFromEveryState drives every row from every state on both emulators (from a")
	p("from-state it applies, from any other it is refused and writes nothing, and the Go predicate")
	p("agrees with the engine each time). DESIGN.md §3's diagram is a summary of this table.")
	p("")
	p("## States")
	p("")
	p("| state | kind | meaning |")
	p("|---|---|---|")
	for _, s := range allStates {
		p("| `%s` | %s | %s |", s, stateKind(s), stateMeaning[s])
	}
	p("")
	p("## Reading a row")
	p("")
	p("- **from**: the states the write is accepted from; `retry_wait (due)` means from that state only")
	p("  while the guard in brackets holds. Park and ClaimDispatch are conditioned on the state the")
	p("  caller read, which must be one of these.")
	p("- **fence**: `at version` — the item's assignment_version must be the version the caller")
	p("  names (its claim's, or the one it read): a worker that lost its assignment cannot write.")
	p("- **guards**: the rest of the condition, in words (their DynamoDB expressions are listed under")
	p("  [Guards](#guards)). Guards of the review item are checked in the same transaction.")
	p("- **to**: the state the write leaves; **attempts / version**: how it changes `attempts` and")
	p("  `assignment_version` (the fencing token).")
	p("- **review**: what it does to the task's review item; **effect**: `retry-safe` rows serve only")
	p("  steps whose repetition costs money alone, `effect` rows only steps that may act twice.")
	p("- **refused with**: what the method returns when the condition fails; the item is unchanged.")
	p("  *Repeat*: found in its to-state already, the call succeeds and writes nothing.")
	p("")
	p("## Transitions")
	p("")
	p("| op | method | actor | from | fence | guards | to | attempts / version | review | effect | refused with |")
	p("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, tr := range trs {
		refused := "`" + string(tr.Refusal) + "`"
		if tr.Repeat {
			refused += "; *repeat*"
		}
		method := "`" + tr.Method + "`"
		if tr.Manual {
			method += " (condition written out)"
		}
		p("| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", tr.Op, method, actorsOf(tr), fromColumn(tr),
			orDash(string(tr.Fence)), orDash(strings.Join(guardNames(tr, ""), ", ")), toColumn(tr), counters(tr),
			orDash(string(tr.Review)), orDash(string(tr.Effect)), refused)
	}
	p("")
	p("## From each state")
	p("")
	p("Which writes move a task out of (or within) each state, where to, and under which condition.")
	for _, s := range allStates {
		p("")
		p("### From `%s`", s)
		p("")
		n := 0
		for _, tr := range trs {
			if !slices.Contains(tr.From, s) {
				continue
			}
			n++
			cond := guardNames(tr, s)
			if tr.Fence != ledger.FenceNone {
				cond = append([]string{"fenced " + string(tr.Fence)}, cond...)
			}
			when := ""
			if len(cond) > 0 {
				when = " when " + strings.Join(cond, ", ")
			}
			p("- `%s` (%s; %s) → %s%s.", tr.Op, tr.Method, actorsOf(tr), toColumn(tr), when)
		}
		if n == 0 {
			p("- nothing: a person's action starts a new task (regenerate); TTL deletes the item after retention.")
		}
	}
	p("")
	p("### Without a task state")
	p("")
	for _, tr := range trs {
		if len(tr.From) == 0 {
			to := toColumn(tr)
			if tr.To == "" {
				to = "review item: " + string(tr.Review)
			}
			p("- `%s` (%s; %s) → %s when %s.", tr.Op, tr.Method, actorsOf(tr), to, strings.Join(guardNames(tr, ""), ", "))
		}
	}
	p("")
	p("## Guards")
	p("")
	p("| guard | DynamoDB condition |")
	p("|---|---|")
	seen := map[string]bool{}
	for _, tr := range trs {
		for _, g := range tr.Guards {
			for _, x := range append([]ledger.Guard{g}, flatWhen(tr)...) {
				if x.Name == "fence" || x.Name == "from" || seen[x.Name] {
					continue
				}
				seen[x.Name] = true
				p("| %s | `%s` |", x.Name, strings.ReplaceAll(x.Expr, "|", "\\|"))
			}
		}
	}
	p("| fence `at version` | `#assignment_version = :mine` (`:ver` in Park and Act) |")
	return b.String()
}

func flatWhen(tr ledger.Transition) []ledger.Guard {
	var out []ledger.Guard
	for _, s := range tr.From {
		out = append(out, tr.When[s]...)
	}
	return out
}
