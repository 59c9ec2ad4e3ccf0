package retrypolicy_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// seeded returns a policy with small numbers and a deterministic source.
func seeded() retrypolicy.Policy {
	return retrypolicy.Policy{
		Base:   time.Second,
		Cap:    time.Minute,
		MaxAge: time.Hour,
		Rand:   rand.New(rand.NewPCG(1, 2)),
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()

	p := retrypolicy.Default()
	if p.Base != time.Second || p.Cap != 5*time.Minute || p.MaxAttempts != 5 || p.MaxAge != time.Hour || p.Rand != nil {
		t.Errorf("Default() = %+v", p)
	}
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()

	p := seeded()
	for attempt := range 12 {
		ceil := min(p.Cap, p.Base<<attempt)
		var hi time.Duration
		for range 500 {
			d := p.Backoff(attempt, 0)
			if d < 0 || d > ceil {
				t.Fatalf("Backoff(%d) = %v, want in [0, %v]", attempt, d, ceil)
			}
			hi = max(hi, d)
		}
		// Full jitter spreads over the whole range: 500 draws that all stay
		// in the lower half would mean the ceiling is wrong.
		if hi < ceil/2 {
			t.Errorf("attempt %d: largest of 500 draws %v, want >= %v", attempt, hi, ceil/2)
		}
	}
}

func TestBackoffDeterministic(t *testing.T) {
	t.Parallel()

	a, b := seeded(), seeded()
	same := true
	var prev time.Duration
	varied := false
	for i := range 20 {
		da, db := a.Backoff(10, 0), b.Backoff(10, 0)
		same = same && da == db
		varied = varied || (i > 0 && da != prev)
		prev = da
	}
	if !same {
		t.Error("two policies with the same seed drew different delays")
	}
	if !varied {
		t.Error("20 draws were all equal: no jitter")
	}
}

func TestBackoffRetryAfterFloor(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name       string
		attempt    int
		retryAfter time.Duration
		lo, hi     time.Duration
	}{
		{"FloorAboveCeiling", 0, 30 * time.Second, 30 * time.Second, 30 * time.Second},
		{"FloorBelowCeiling", 10, 5 * time.Second, 5 * time.Second, time.Minute},
		{"FloorAboveCap", 10, 10 * time.Minute, 10 * time.Minute, 10 * time.Minute},
		{"FloorCappedAtMaxAge", 0, 3 * time.Hour, time.Hour, time.Hour},
		{"NegativeFloorIgnored", 0, -time.Hour, 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			p := seeded()
			for range 200 {
				if d := p.Backoff(tt.attempt, tt.retryAfter); d < tt.lo || d > tt.hi {
					t.Fatalf("Backoff(%d, %v) = %v, want in [%v, %v]", tt.attempt, tt.retryAfter, d, tt.lo, tt.hi)
				}
			}
		})
	}
}

func TestBackoffOverflow(t *testing.T) {
	t.Parallel()

	tests := []struct {
		attempt int
		hi      time.Duration
	}{
		{62, time.Minute},
		{63, time.Minute},
		{64, time.Minute},
		{1000, time.Minute},
		{math.MaxInt, time.Minute},
		{-1, time.Second}, // treated as 0: ceiling is Base
		{math.MinInt, time.Second},
	}
	for _, tt := range tests {
		p := seeded()
		var hi time.Duration
		for range 200 {
			d := p.Backoff(tt.attempt, 0)
			if d < 0 || d > tt.hi {
				t.Fatalf("Backoff(%d) = %v, want in [0, %v]", tt.attempt, d, tt.hi)
			}
			hi = max(hi, d)
		}
		if hi < tt.hi/2 {
			t.Errorf("Backoff(%d): largest of 200 draws %v, want >= %v", tt.attempt, hi, tt.hi/2)
		}
	}
}

func TestBackoffExtremeCap(t *testing.T) {
	t.Parallel()

	p := retrypolicy.Policy{Base: 1, Cap: math.MaxInt64, Rand: rand.New(rand.NewPCG(3, 4))}
	for _, attempt := range []int{0, 1, 62, 63, math.MaxInt} {
		if d := p.Backoff(attempt, 0); d < 0 {
			t.Errorf("Backoff(%d) = %v, want >= 0", attempt, d)
		}
	}
	if d := p.Backoff(0, 0); d > 1 {
		t.Errorf("Backoff(0) with Base 1ns = %v, want <= 1ns", d)
	}
}

func TestBackoffZeroPolicyUsesDefaults(t *testing.T) {
	t.Parallel()

	var p retrypolicy.Policy
	for range 100 {
		if d := p.Backoff(100, 0); d < 0 || d > 5*time.Minute {
			t.Fatalf("zero Policy Backoff(100) = %v, want in [0, 5m]", d)
		}
		if d := p.Backoff(0, 0); d > time.Second {
			t.Fatalf("zero Policy Backoff(0) = %v, want <= 1s", d)
		}
	}
}

// badRand returns values outside [0, n).
type badRand struct{ v int64 }

func (r badRand) Int64N(int64) int64 { return r.v }

func TestBackoffClampsBadRand(t *testing.T) {
	t.Parallel()

	for _, v := range []int64{-5, math.MinInt64, math.MaxInt64} {
		p := retrypolicy.Policy{Base: time.Second, Cap: time.Minute, Rand: badRand{v}}
		if d := p.Backoff(3, 0); d < 0 || d > 8*time.Second {
			t.Errorf("Rand returning %d: Backoff(3) = %v, want in [0, 8s]", v, d)
		}
	}
}

func TestNextRetryAt(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a, b := seeded(), seeded()
	for attempt := range 8 {
		at := a.NextRetryAt(now, attempt, 2*time.Second)
		if want := now.Add(b.Backoff(attempt, 2*time.Second)); !at.Equal(want) {
			t.Fatalf("NextRetryAt(attempt %d) = %v, want now+Backoff = %v", attempt, at, want)
		}
		if d := at.Sub(now); d < 2*time.Second || d > time.Minute {
			t.Fatalf("NextRetryAt(attempt %d) is now+%v, want in [2s, 1m]", attempt, d)
		}
	}
}

func FuzzBackoff(f *testing.F) {
	f.Add(0, int64(time.Second), int64(5*time.Minute), int64(0), int64(time.Hour), uint64(1))
	f.Add(63, int64(1), int64(math.MaxInt64), int64(-1), int64(0), uint64(2))
	f.Add(math.MaxInt, int64(math.MaxInt64), int64(1), int64(math.MaxInt64), int64(1), uint64(3))
	f.Add(-7, int64(-1), int64(-1), int64(2*time.Hour), int64(-5), uint64(4))
	f.Fuzz(func(t *testing.T, attempt int, base, capacity, retryAfter, maxAge int64, seed uint64) {
		p := retrypolicy.Policy{
			Base:   time.Duration(base),
			Cap:    time.Duration(capacity),
			MaxAge: time.Duration(maxAge),
			Rand:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		}
		effCap, effAge := p.Cap, p.MaxAge
		if effCap <= 0 {
			effCap = 5 * time.Minute
		}
		if effAge <= 0 {
			effAge = time.Hour
		}
		floor := min(max(time.Duration(retryAfter), 0), effAge)

		d := p.Backoff(attempt, time.Duration(retryAfter))
		if d < floor || d > max(effCap, floor) {
			t.Fatalf("Backoff(%d, %v) with %+v = %v, want in [%v, %v]",
				attempt, time.Duration(retryAfter), p, d, floor, max(effCap, floor))
		}
	})
}
