package soak_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/soak"
)

// A fast engine runs the soak on its default clock and rate; a slow one
// runs the same protocol on a slower clock: every duration multiplied by
// one scale (so their ratios, which the protocol depends on, stay), and
// the submit rate cut to what the engine sustains.
func TestPacedToSlowsTheClockForASlowEngineOnly(t *testing.T) {
	base := soak.Config{}.PacedTo(soak.Pace{})
	fast := soak.Config{}.PacedTo(soak.Pace{Serial: 300 * time.Microsecond, Loaded: time.Millisecond, Query: 300 * time.Microsecond, Throughput: 5000, Writers: 8})
	if fast.Scale != 1 || fast.Lease != base.Lease || fast.SubmitRate != base.SubmitRate || fast.MaxAge != base.MaxAge {
		t.Fatalf("fast engine: scale %v, lease %s, rate %v, max age %s; want the defaults (%s, %v, %s)",
			fast.Scale, fast.Lease, fast.SubmitRate, fast.MaxAge, base.Lease, base.SubmitRate, base.MaxAge)
	}
	slow := soak.Config{}.PacedTo(soak.Pace{Serial: 6 * time.Millisecond, Loaded: 40 * time.Millisecond, Query: 3 * time.Millisecond, Throughput: 250, Writers: 8})
	if slow.Scale < 2 {
		t.Fatalf("slow engine: scale %v, want at least 2 (a lease of %s spans %d busy writes of 40 ms at most)", slow.Scale, base.Lease, int(base.Lease/(40*time.Millisecond)))
	}
	for name, d := range map[string][2]time.Duration{
		"lease": {base.Lease, slow.Lease}, "function timeout": {base.FunctionTimeout, slow.FunctionTimeout},
		"call timeout": {base.CallTimeout, slow.CallTimeout}, "max age": {base.MaxAge, slow.MaxAge},
		"reconcile period": {base.ReconcileEvery, slow.ReconcileEvery}, "dispatch timeout": {base.DispatchTimeout, slow.DispatchTimeout},
	} {
		if want := time.Duration(float64(d[0]) * slow.Scale); d[1] != want {
			t.Errorf("%s: %s, want %s (%s × %v)", name, d[1], want, d[0], slow.Scale)
		}
	}
	if slow.SubmitRate >= base.SubmitRate || slow.SubmitRate <= 0 {
		t.Errorf("slow engine: submit rate %v, want cut below %v", slow.SubmitRate, base.SubmitRate)
	}
}
