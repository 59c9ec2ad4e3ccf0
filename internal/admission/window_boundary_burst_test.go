package admission_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestBurstAcrossAWindowBoundaryStaysWithinTheLimit: a burst in a
// window's last half second and another in the next window's first half
// second together stay within requests_per_minute. A provider counting any
// 60 s (a rolling window or a token bucket, as the commercial ones do)
// would otherwise see twice its limit within one second, and DESIGN §13's
// "a burst never exceeds the provider's limits" would not hold at a window
// boundary.
func TestBurstAcrossAWindowBoundaryStaysWithinTheLimit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		const rpm = 5
		b := setup(t, e, nil, map[string]admission.Limit{"m1": {RequestsPerWindow: rpm, TokensPerWindow: 1_000_000}})
		b.clock.Set(t0.Add(59*time.Second + 700*time.Millisecond))
		first, _ := b.burst(t, "m1", 20, 10)
		b.clock.Set(t0.Add(60*time.Second + 300*time.Millisecond))
		second, _ := b.burst(t, "m1", 20, 10)
		if n := len(first) + len(second); n > rpm {
			t.Fatalf("%d requests admitted within 600 ms for a model limited to %d per minute (%d before the window boundary, %d after)",
				n, rpm, len(first), len(second))
		}
	})
}
