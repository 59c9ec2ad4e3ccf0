package retrypolicy

import (
	"math/rand/v2"
	"time"
)

// Defaults used by [Default] and for zero or negative [Policy] fields.
const (
	DefaultBase        = time.Second
	DefaultCap         = 5 * time.Minute
	DefaultMaxAttempts = 5
	DefaultMaxAge      = time.Hour
)

// Rand is the random source for jitter. *math/rand/v2.Rand satisfies it.
type Rand interface {
	// Int64N returns a uniform value in [0, n); n > 0.
	Int64N(n int64) int64
}

// Policy holds backoff and budget settings. Zero or negative fields take the
// defaults, so the zero Policy behaves like [Default]. A Policy is a value:
// safe to copy and, if its Rand is, to share between goroutines.
type Policy struct {
	// Base is the first retry's ceiling; default 1s.
	Base time.Duration
	// Cap is the largest ceiling any retry draws under; default 5m.
	Cap time.Duration
	// MaxAttempts is the attempt budget; default 5.
	MaxAttempts int
	// MaxAge is the age budget from the task's creation; default 1h. It also
	// caps the Retry-After floor.
	MaxAge time.Duration
	// Rand is the jitter source; nil means a package-level source that is
	// safe for concurrent use.
	Rand Rand
}

// Default returns the default policy: Base 1s, Cap 5m, MaxAttempts 5,
// MaxAge 1h, package-level random source.
func Default() Policy {
	return Policy{Base: DefaultBase, Cap: DefaultCap, MaxAttempts: DefaultMaxAttempts, MaxAge: DefaultMaxAge}
}

// withDefaults returns p with every unset field defaulted.
func (p Policy) withDefaults() Policy {
	if p.Base <= 0 {
		p.Base = DefaultBase
	}
	if p.Cap <= 0 {
		p.Cap = DefaultCap
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MaxAge <= 0 {
		p.MaxAge = DefaultMaxAge
	}
	if p.Rand == nil {
		p.Rand = globalRand{}
	}
	return p
}

// globalRand draws from math/rand/v2's top-level source, which is safe for
// concurrent use and seeded per process.
type globalRand struct{}

func (globalRand) Int64N(n int64) int64 { return rand.Int64N(n) }

// Backoff returns the delay before retry number attempt (0-based: attempt 0 is
// the first retry). It is "full jitter": uniform in
// [0, min(Cap, Base·2^attempt)], then raised to retryAfter, a floor that is
// itself capped at MaxAge. Negative attempts count as 0, negative retryAfter
// as none; any attempt, however large, is safe from overflow.
func (p Policy) Backoff(attempt int, retryAfter time.Duration) time.Duration {
	p = p.withDefaults()
	d := jitter(p.Rand, ceiling(p.Base, p.Cap, attempt))
	floor := min(max(retryAfter, 0), p.MaxAge)
	return max(d, floor)
}

// ceiling returns min(limit, base·2^attempt) without overflowing; base and
// limit are positive.
func ceiling(base, limit time.Duration, attempt int) time.Duration {
	shift := uint(max(attempt, 0))
	// base<<shift > limit exactly when base > limit>>shift; checking this way
	// never shifts base into overflow. Shifts of 63 or more give 0.
	if base > limit>>shift {
		return limit
	}
	return base << shift
}

// jitter returns a uniform draw in [0, ceil], clamped in case r misbehaves.
func jitter(r Rand, ceil time.Duration) time.Duration {
	if ceil <= 0 {
		return 0
	}
	n := int64(ceil)
	if n < 1<<63-1 {
		n++ // make ceil itself reachable
	}
	return min(max(time.Duration(r.Int64N(n)), 0), ceil)
}

// NextRetryAt returns when retry number attempt may start: now plus
// [Policy.Backoff]. Check the result with [Policy.FitsAge].
func (p Policy) NextRetryAt(now time.Time, attempt int, retryAfter time.Duration) time.Time {
	return now.Add(p.Backoff(attempt, retryAfter))
}
