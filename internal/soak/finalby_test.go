package soak

import (
	"testing"
	"time"
)

// TestFinalByIsTheSecondRunAfterTheDeadline: the final_too_late allowance
// ends with the second complete reconciler walk that started after the deadline, is
// never shorter than one period plus one run budget, and ignores ticks that
// started before the deadline or have not ended.
func TestFinalByIsTheSecondRunAfterTheDeadline(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	s := &soak{cfg: Config{ReconcileEvery: time.Second, ReconcileBudget: 2 * time.Second}}
	deadline := at(10)
	if got, want := s.finalBy(deadline), at(23); !got.Equal(want) {
		t.Fatalf("no runs: %v, want the floor plus ten periods %v", got, want)
	}
	s.runs = []tickSpan{
		{start: at(9.5), end: at(20), complete: true},  // started before the deadline: does not count
		{start: at(10.5), end: at(16), complete: true}, // first after it
		{start: at(16.1), end: at(16.9)},               // cut short by its budget: does not count
		{start: at(17), end: at(21), complete: true},   // second complete walk: the allowance ends here
		{start: at(21.5), end: at(22), complete: true},
	}
	if got, want := s.finalBy(deadline), at(21); !got.Equal(want) {
		t.Fatalf("slow runs: %v, want the second run's end %v", got, want)
	}
	s.runs = []tickSpan{{start: at(10.1), end: at(10.4), complete: true}, {start: at(11.1), end: at(11.3), complete: true}}
	if got, want := s.finalBy(deadline), at(13); !got.Equal(want) {
		t.Fatalf("fast runs: %v, want the floor %v", got, want)
	}
	s.runs = []tickSpan{{start: at(10.1), end: at(10.4), complete: true}, {start: at(11.1), complete: true}} // still running
	if got, want := s.finalBy(deadline), at(23); !got.Equal(want) {
		t.Fatalf("unfinished second run: %v, want the floor plus ten periods %v", got, want)
	}
	s.runs = []tickSpan{{start: at(10.1), end: at(12), complete: true}, {start: at(12.1), end: at(19)}, {start: at(19.1), end: at(25)}}
	if got, want := s.finalBy(deadline), at(23); !got.Equal(want) {
		t.Fatalf("walks cut short after the first: %v, want the floor plus ten periods %v", got, want)
	}
}
