package soak

import (
	"testing"
	"time"
)

// TestFinalByCatchesAReconcilerThatNeverFinishesAWalk: finalBy's doc
// promises that the final_too_late rule "still catches a reconciler that
// lets a budget run over: that one misses walk after walk". With fewer than
// two complete walks after the deadline the allowance is bounded (the
// floor plus ten periods), not stretched to the end of the last recorded
// tick — the end of the soak — so a reconciler that never completes a walk
// (every run cut short by its budget, e.g. one that starts its walk over
// each run and never reaches the task's stream) still produces a
// final_too_late violation: here, for a task final an hour after its
// deadline.
func TestFinalByCatchesAReconcilerThatNeverFinishesAWalk(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	s := &soak{cfg: Config{ReconcileEvery: time.Second, ReconcileBudget: 2 * time.Second}}
	deadline := at(10)
	for start := 10.1; start < 3600; start++ {
		s.runs = append(s.runs, tickSpan{start: at(start), end: at(start + 0.9)}) // every walk cut short
	}
	finalAt := at(3500) // the task became final ~58 min after its age budget ended
	if by := s.finalBy(deadline); !finalAt.After(by) {
		t.Fatalf("a task final %s after its deadline is allowed (until %s after it) though no reconciler walk after the deadline ever completed",
			finalAt.Sub(deadline), by.Sub(deadline))
	}
	// The same with one complete walk right after the deadline, then
	// nothing but cut-short walks.
	s.runs = append([]tickSpan{{start: at(10.05), end: at(10.09), complete: true}}, s.runs...)
	if by := s.finalBy(deadline); !finalAt.After(by) {
		t.Fatalf("one complete walk, then only cut-short ones: a task final %s after its deadline is allowed (until %s after it)",
			finalAt.Sub(deadline), by.Sub(deadline))
	}
}

// TestFinalByCatchesARunThatOverrunsItsBudget: the same rule's other blind
// spot. A reconciler that ignores its run budget (ReconcileBudget, 2 s here)
// and walks on for 12 s a run — the schedule's timeout, budget + 10 s —
// reports every walk complete, so the allowance becomes "the end of the
// second 12 s run after the deadline": a task final 22 s after its age
// budget ended (the promise: one period plus one run budget, 3 s) passes.
// Nothing else in the soak compares a run's length with its budget.
func TestFinalByCatchesARunThatOverrunsItsBudget(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	s := &soak{cfg: Config{ReconcileEvery: time.Second, ReconcileBudget: 2 * time.Second}}
	deadline := at(10)
	for start := 0.1; start < 60; start += 12.1 {
		s.runs = append(s.runs, tickSpan{start: at(start), end: at(start + 12), complete: true}) // 6× its budget, "complete"
	}
	finalAt := at(32)
	if by := s.finalBy(deadline); !finalAt.After(by) {
		t.Fatalf("runs of 12 s against a 2 s budget: a task final %s after its deadline is allowed (until %s after it)",
			finalAt.Sub(deadline), by.Sub(deadline))
	}
}
