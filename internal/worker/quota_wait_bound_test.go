package worker

import (
	"testing"
	"time"
)

// TestQuotaWaitBoundsTheClaimsOfATaskAHoldNeverFrees: a task whose
// caller's quota stays held by a reservation that never settles waits
// again and again until its age budget (one hour by default) parks it;
// each wait is a claim. With the shortest waits the jitter allows (none),
// it makes at most 127 claims in that hour (the bound quotaWaitFor
// states), and every wait lies between its base and twice it: 5–10 s for
// a fresh task, never more than a minute.
func TestQuotaWaitBoundsTheClaimsOfATaskAHoldNeverFrees(t *testing.T) {
	t.Parallel()
	none := func(time.Duration) time.Duration { return 0 }
	most := func(d time.Duration) time.Duration { return d - 1 }
	if d := quotaWaitFor(0, none); d != QuotaWait {
		t.Fatalf("a fresh task waits at least %v, want %v", d, QuotaWait)
	}
	if d := quotaWaitFor(0, most); d >= 2*QuotaWait {
		t.Fatalf("a fresh task waits up to %v, want under %v", d, 2*QuotaWait)
	}
	for _, kept := range []time.Duration{0, time.Second, time.Minute, time.Hour, 1 << 62} {
		lo, hi := quotaWaitFor(kept, none), quotaWaitFor(kept, most)
		if lo < QuotaWait || hi >= 2*QuotaWaitMax || hi < lo {
			t.Fatalf("kept %v: waits %v to %v, want within [%v, %v)", kept, lo, hi, QuotaWait, 2*QuotaWaitMax)
		}
	}
	claims := 0
	for age := time.Duration(0); age < time.Hour; age += quotaWaitFor(age, none) {
		claims++
	}
	if claims > 127 {
		t.Fatalf("a task a hold never frees is claimed %d times in its hour, want at most 127", claims)
	}
}
