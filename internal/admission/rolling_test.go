package admission_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestNoMinuteHoldsMoreThanTheLimit: over five minutes of bursts at random
// moments, no span of 60 s (not only no calendar minute) holds more
// admitted calls than the limit — a provider counting a rolling minute
// never sees more than it allows — while sustained demand still gets most
// of the limit (slots of 5 s: at least 12/13 of it per minute, less the
// slot a burst straddles).
func TestNoMinuteHoldsMoreThanTheLimit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		const limit = 10
		b := setup(t, e, nil, map[string]admission.Limit{"m1": {RequestsPerWindow: limit, TokensPerWindow: 1_000_000}})
		rng := rand.New(rand.NewPCG(14, 14))
		var admitted []time.Time
		now := t0.Add(5 * time.Second)
		end := now.Add(5 * time.Minute)
		for now.Before(end) {
			b.clock.Set(now)
			ok, _ := b.burst(t, "m1", rng.IntN(7), 10)
			for range ok {
				admitted = append(admitted, now)
			}
			now = now.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
		}
		for i, at := range admitted {
			n := 0
			for _, o := range admitted[:i+1] {
				if at.Sub(o) < time.Minute {
					n++
				}
			}
			if n > limit {
				t.Fatalf("%d calls admitted in the 60 s ending %s; the limit is %d", n, at.Sub(t0), limit)
			}
		}
		if len(admitted) < 4*limit {
			t.Fatalf("only %d calls admitted in 5 minutes of demand far above %d per minute", len(admitted), limit)
		}
		t.Logf("admitted %d calls in 5 minutes at %d per minute", len(admitted), limit)
	})
}

// TestReleaseGivesBackAnUnusedTicket: a ticket whose call was never made
// leaves the window (request and tokens, in its slot too), so the next
// call of the same minute is admitted; the ticket is valid until its slot
// ends.
func TestReleaseGivesBackAnUnusedTicket(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, nil, map[string]admission.Limit{"m1": {RequestsPerWindow: 1, TokensPerWindow: 1000}})
		tk, err := b.adm.Admit(ctx, "m1", 300)
		if err != nil {
			t.Fatal(err)
		}
		if want := t0.Add(10 * time.Second); !tk.ValidUntil.Equal(want) {
			t.Fatalf("ValidUntil %s, want the end of the 5 s slot %s", tk.ValidUntil, want)
		}
		var na *admission.NotAdmittedError
		if _, err := b.adm.Admit(ctx, "m1", 300); !errors.As(err, &na) {
			t.Fatalf("a second call with the limit 1: %v, want NotAdmittedError", err)
		}
		if err := b.adm.Release(ctx, tk); err != nil {
			t.Fatal(err)
		}
		if w, _ := b.adm.Read(ctx, "m1", b.clock.Now()); w.Requests != 0 || w.Tokens != 0 {
			t.Fatalf("after Release the window is %+v, want empty", w)
		}
		if _, err := b.adm.Admit(ctx, "m1", 300); err != nil {
			t.Fatalf("after Release: %v, want admitted", err)
		}
	})
}
