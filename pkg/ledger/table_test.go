package ledger_test

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestEveryWritingMethodHasATransition: the table is the one declaration
// of the state machine only if every method that writes is in it. The
// golden file of conditions names every writing method (its "== Method/
// variant" blocks); each must be some row's Method, and each row's Method
// must be a method of *Ledger.
func TestEveryWritingMethodHasATransition(t *testing.T) {
	t.Parallel()
	golden, err := os.ReadFile(conditionsGolden)
	if err != nil {
		t.Fatal(err)
	}
	inTable := map[string]bool{}
	lt := reflect.TypeFor[*ledger.Ledger]()
	for _, tr := range ledger.Transitions() {
		m := strings.Fields(tr.Method)[0]
		inTable[m] = true
		if _, ok := lt.MethodByName(m); !ok {
			t.Errorf("row %s: Method %q is not a method of *ledger.Ledger", tr.Op, tr.Method)
		}
	}
	writers := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^== (\w+)`).FindAllStringSubmatch(string(golden), -1) {
		writers[m[1]] = true
	}
	if len(writers) < 30 {
		t.Fatalf("found %d writing methods in %s: the file's blocks were not read", len(writers), conditionsGolden)
	}
	for m := range writers {
		if !inTable[m] {
			t.Errorf("%s writes (%s) but no transition names it", m, conditionsGolden)
		}
	}
}

// TestTransitionRowsAreConsistent checks what the table's readers rely
// on: unique ops, a fence guard exactly where the row declares a fence,
// from-states on every derived row, valid states and a declared refusal.
func TestTransitionRowsAreConsistent(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, tr := range ledger.Transitions() {
		if seen[tr.Op] {
			t.Errorf("op %s appears twice", tr.Op)
		}
		seen[tr.Op] = true
		fenced := false
		for _, g := range tr.Guards {
			fenced = fenced || g.Name == "fence"
			if g.Name == "" || (g.Expr == "" && g.Name != "from") {
				t.Errorf("%s: a guard without a name or an expression: %+v", tr.Op, g)
			}
		}
		if !tr.Manual && fenced != (tr.Fence != ledger.FenceNone) {
			t.Errorf("%s: Fence %q, but a fence guard in its condition: %v", tr.Op, tr.Fence, fenced)
		}
		if !tr.Manual && len(tr.From) == 0 {
			t.Errorf("%s: no from-states", tr.Op)
		}
		for _, s := range append(append([]ledger.State{}, tr.From...), tr.To) {
			if s != "" && !s.Valid() {
				t.Errorf("%s: state %q is not a task state", tr.Op, s)
			}
		}
		if tr.Refusal == "" || len(tr.Actors) == 0 {
			t.Errorf("%s: no refusal or no actor", tr.Op)
		}
	}
}
