package admission_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestAttack14BoundaryBurstDoublesTheLimit (adversarial review of issue
// 14): windows are fixed calendar minutes, so a full window's requests
// admitted in its last half second and a full window's admitted in the
// next window's first half second are 2× requests_per_minute within one
// second. A provider counting any 60 s (a rolling window or a token bucket,
// as the commercial ones do) sees twice its limit: DESIGN §13's "a burst
// never exceeds the provider's limits" does not hold at a window boundary.
// Smallest fix: admit against the current window plus the previous
// window's count weighted by the part of it still inside the last 60 s
// (sliding-window counter; one more key in the conditional UpdateItem's
// condition via a read of the previous item), or halve each window to 30 s
// with half the limit.
func TestAttack14BoundaryBurstDoublesTheLimit(t *testing.T) {
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
