package soak

import "testing"

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
