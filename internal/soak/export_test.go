package soak

import "testing"

// PendingFixes are invariants the soak tests only log instead of failing
// on. Issue 11's fixes are merged, so it is empty: every violation fails.
var PendingFixes = map[string]bool{}

// Split divides violations into those of PendingFixes and the rest.
func Split(vs []Violation) (pending, other []Violation) {
	for _, v := range vs {
		if PendingFixes[v.Rule] {
			pending = append(pending, v)
		} else {
			other = append(other, v)
		}
	}
	return pending, other
}

// soakSlots bounds the soak runs this test process makes at once, whatever
// -parallel allows: a soak is a real-time stress run (leases of seconds,
// invocation deadlines), and its rules on deadlines and uncertainty
// (call_cut_by_deadline, false_uncertainty) assume a process that keeps up
// with them. make test runs the other packages beside it at a lower CPU
// priority (Makefile); each run mostly
// waits on its own clock (two at once used 0.84 of a core), so three at
// once fit on two cores; more starve each other.
var soakSlots = make(chan struct{}, 3)

// HoldSoakSlot waits for a soak slot, held until t ends.
func HoldSoakSlot(t testing.TB) {
	t.Helper()
	soakSlots <- struct{}{}
	t.Cleanup(func() { <-soakSlots })
}
