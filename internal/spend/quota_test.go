package spend_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestDailyQuota(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		day := testenv.NextUTCDay(time.Now())
		clock := testenv.NewClock(day.Add(23*time.Hour + 59*time.Minute + 500*time.Millisecond))
		q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: spend.Quota{Unit: spend.UnitTokens, Limit: 1000}, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Check(ctx, "alice", 0); err != nil {
			t.Fatalf("fresh day: %v", err)
		}
		if err := q.Add(ctx, "alice", spend.Usage{InputTokens: 700, OutputTokens: 300, Cost: 5}); err != nil {
			t.Fatal(err)
		}
		e.Counter.Reset()
		var qe *spend.QuotaExceededError
		if err := q.Check(ctx, "alice", 0); !errors.As(err, &qe) {
			t.Fatalf("at the limit: %v, want QuotaExceededError", err)
		}
		if c := e.Counter.Calls(); c["DynamoDB.GetItem"] != 1 || len(c) != 1 {
			t.Fatalf("check made calls %v; want one GetItem and no write", c)
		}
		if qe.Used != 1000 || qe.Limit != 1000 || qe.Day != day.Format(time.DateOnly) || qe.RetryAfterSeconds() != 60 {
			t.Fatalf("error %+v (retry after %ds); want 1000/1000 on %s, 60 s to midnight", qe, qe.RetryAfterSeconds(), day.Format(time.DateOnly))
		}
		// Other callers are not affected; want counts against the limit.
		if err := q.Check(ctx, "bob", 1000); err != nil {
			t.Fatalf("bob: %v", err)
		}
		if err := q.Check(ctx, "bob", 1001); !errors.As(err, &qe) {
			t.Fatalf("bob wanting more than the quota: %v", err)
		}
		// The next UTC day starts fresh.
		clock.Advance(time.Minute)
		if err := q.Check(ctx, "alice", 0); err != nil {
			t.Fatalf("next day: %v", err)
		}
		if err := q.Check(ctx, "alice", -1); err == nil || errors.As(err, &qe) {
			t.Fatalf("negative want: %v, want a plain error", err)
		}
		if key := spend.QuotaItemKey("alice", "2026-12-01"); len(key) != len("quota#")+26+len("#2026-12-01") {
			t.Fatalf("key %q", key)
		}
	})
}

func TestUSDQuotaCountsMicros(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		// A clock that stands still, away from midnight: on the real time a
		// run across a UTC midnight would find the day's usage gone.
		clock := testenv.NewClock(testenv.ClockStart(time.Now()))
		q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: spend.Quota{Unit: spend.UnitUSD, Limit: 1_000_000}, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := q.Add(ctx, "carol", spend.Usage{InputTokens: 1 << 20, Cost: 400_000}); err != nil {
				t.Fatal(err)
			}
		}
		used, err := q.Used(ctx, "carol")
		if err != nil || used != 1_200_000 {
			t.Fatalf("used %d, %v; want 1200000 micros", used, err)
		}
		var qe *spend.QuotaExceededError
		if err := q.Check(ctx, "carol", 0); !errors.As(err, &qe) || qe.Unit != spend.UnitUSD {
			t.Fatalf("over a USD quota: %v", err)
		}
	})
}

// TestQuotaReservationsCannotOverrunTheQuota: 40 calls of one caller
// reserve on its day's quota item at once (one conditional UpdateItem
// each); those that fit together are admitted, the others refused with
// what was used and reserved, and a submit's Check sees the reservations.
// Settling replaces each reservation by the reported usage, and a
// reservation is settled on the day it was made, even after midnight.
func TestQuotaReservationsCannotOverrunTheQuota(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		day := testenv.NextUTCDay(time.Now())
		clock := testenv.NewClock(day.Add(23 * time.Hour))
		q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: spend.Quota{Unit: spend.UnitTokens, Limit: 100}, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		const n = 40
		holds := make([]*spend.QuotaHold, n)
		refusals := make([]*spend.QuotaExceededError, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r := spend.Reservation{ID: fmt.Sprintf("t_%02d.a1", i), Tokens: 30, Cost: 7}
				h, err := q.Reserve(ctx, "dave", r)
				var qe *spend.QuotaExceededError
				switch {
				case err == nil:
					holds[i] = &h
				case errors.As(err, &qe):
					refusals[i] = qe
				default:
					t.Errorf("reserve %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		admitted := 0
		for i := range n {
			if holds[i] != nil {
				admitted++
				continue
			}
			if qe := refusals[i]; qe != nil && (qe.Used != 90 || qe.Reserved != 90 || qe.Wanted != 30 || qe.Limit != 100 || qe.Day != day.Format(time.DateOnly)) {
				t.Errorf("refusal %+v; want 90 used, all of it reserved, 30 wanted, of 100 on %s", qe, day.Format(time.DateOnly))
			}
		}
		if admitted != 3 {
			t.Fatalf("%d of %d reservations of 30 tokens admitted under a 100-token quota, want 3", admitted, n)
		}
		// A submit's Check does not count the reservations of calls in
		// flight: they free as the calls settle, and the worker waits for
		// them (HeldByCallsInFlight) rather than the caller for a day.
		if err := q.Check(ctx, "dave", 11); err != nil {
			t.Fatalf("submit check with 90 reserved, nothing settled, 11 wanted: %v", err)
		}
		var qe *spend.QuotaExceededError
		if _, err := q.Reserve(ctx, "dave", spend.Reservation{ID: "t_wait.a1", Tokens: 30}); !errors.As(err, &qe) ||
			!qe.HeldByCallsInFlight() || qe.NeverFits() || qe.Settled() != 0 {
			t.Fatalf("a reservation refused while only calls in flight hold the quota: %v, want one held by calls in flight", err)
		}
		// A reservation made again (a lost reply retried) is not counted twice.
		first := -1
		for i := range n {
			if holds[i] != nil {
				first = i
				break
			}
		}
		r := spend.Reservation{ID: fmt.Sprintf("t_%02d.a1", first), Tokens: 30, Cost: 7}
		if h, err := q.Reserve(ctx, "dave", r); err != nil || h != *holds[first] {
			t.Fatalf("reserving %s again: %+v, %v; want the same hold", r.ID, h, err)
		}
		if used, err := q.Used(ctx, "dave"); err != nil || used != 90 {
			t.Fatalf("used %d (%v) after a repeated reservation, want 90", used, err)
		}
		// Settled past midnight: the reported usage lands on the day the
		// reservation was made; the new day starts from nothing.
		clock.Advance(2 * time.Hour)
		for i := range n {
			if holds[i] == nil {
				continue
			}
			r := spend.Reservation{ID: fmt.Sprintf("t_%02d.a1", i), Tokens: 30, Cost: 7}
			for range 2 { // settling again (a lost reply) changes nothing
				if err := q.Settle(ctx, "dave", *holds[i], r, spend.Usage{InputTokens: 4, OutputTokens: 8, Cost: 2}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if used, err := q.Used(ctx, "dave"); err != nil || used != 0 {
			t.Fatalf("the new day's usage is %d (%v), want 0", used, err)
		}
		old, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: spend.Quota{Unit: spend.UnitTokens, Limit: 100},
			Now: func() time.Time { return day.Add(23*time.Hour + 30*time.Minute) }})
		if err != nil {
			t.Fatal(err)
		}
		if used, err := old.Used(ctx, "dave"); err != nil || used != 36 {
			t.Fatalf("%s holds %d tokens (%v), want the three calls' reported 36", day.Format(time.DateOnly), used, err)
		}
	})
}

// TestUSDQuotaReservesCost: a USD quota is held by the reservations' cost;
// a reservation that could never fit is refused without a write.
func TestUSDQuotaReservesCost(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		// A clock that stands still, away from midnight: on the real time a
		// run across a UTC midnight would find the day's usage gone.
		clock := testenv.NewClock(testenv.ClockStart(time.Now()))
		q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: spend.Quota{Unit: spend.UnitUSD, Limit: 1_000_000}, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Reserve(ctx, "erin", spend.Reservation{ID: "t_a.a1", Tokens: 1 << 30, Cost: 600_000}); err != nil {
			t.Fatalf("a reservation within the USD quota (tokens do not count): %v", err)
		}
		var qe *spend.QuotaExceededError
		if _, err := q.Reserve(ctx, "erin", spend.Reservation{ID: "t_b.a1", Tokens: 1, Cost: 500_000}); !errors.As(err, &qe) || qe.Unit != spend.UnitUSD || qe.Used != 600_000 || qe.Wanted != 500_000 {
			t.Fatalf("a second reservation over the USD quota: %v", err)
		}
		e.Counter.Reset()
		if _, err := q.Reserve(ctx, "erin", spend.Reservation{ID: "t_c.a1", Cost: 1_000_001}); !errors.As(err, &qe) {
			t.Fatalf("a reservation larger than the quota: %v", err)
		}
		if c := e.Counter.Calls(); c["DynamoDB.UpdateItem"] != 0 {
			t.Fatalf("a reservation that can never fit wrote %v", c)
		}
	})
}

// TestQuotaRefusalsSayWhatHoldsTheQuota: Check counts the day's settled
// usage alone (the reservations of calls in flight free as they settle);
// a refused Reserve says whether calls in flight hold the room (wait),
// the settled usage leaves none (the next day), or the call is larger
// than the whole quota (never). SettleIfReserved gives back a reservation
// only while it is held, without a read.
func TestQuotaRefusalsSayWhatHoldsTheQuota(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		// A clock that stands still, away from midnight: on the real time a
		// run across a UTC midnight would find the day's usage gone.
		clock := testenv.NewClock(testenv.ClockStart(time.Now()))
		q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: spend.Quota{Unit: spend.UnitTokens, Limit: 100}, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		a := spend.Reservation{ID: "t_a.a1", Tokens: 60}
		h, err := q.Reserve(ctx, "fay", a)
		if err != nil {
			t.Fatal(err)
		}
		var qe *spend.QuotaExceededError
		if err := q.Check(ctx, "fay", 100); err != nil {
			t.Fatalf("check with 60 reserved, nothing settled: %v", err)
		}
		if _, err := q.Reserve(ctx, "fay", spend.Reservation{ID: "t_b.a1", Tokens: 50}); !errors.As(err, &qe) || !qe.HeldByCallsInFlight() {
			t.Fatalf("refused while a call in flight holds 60: %v, want held by calls in flight", err)
		}
		if err := q.Settle(ctx, "fay", h, a, spend.Usage{InputTokens: 30, OutputTokens: 30}); err != nil {
			t.Fatal(err)
		}
		if err := q.Check(ctx, "fay", 41); !errors.As(err, &qe) || qe.Settled() != 60 || qe.HeldByCallsInFlight() || qe.NeverFits() {
			t.Fatalf("check of 41 with 60 settled: %v, want refused until the next day", err)
		}
		if _, err := q.Reserve(ctx, "fay", spend.Reservation{ID: "t_b.a1", Tokens: 50}); !errors.As(err, &qe) || qe.HeldByCallsInFlight() || qe.NeverFits() {
			t.Fatalf("reserve of 50 with 60 settled: %v, want refused until the next day", err)
		}
		if _, err := q.Reserve(ctx, "gus", spend.Reservation{ID: "t_c.a1", Tokens: 101}); !errors.As(err, &qe) || !qe.NeverFits() || qe.HeldByCallsInFlight() {
			t.Fatalf("a reservation above the whole quota: %v, want never fits", err)
		}
		if err := q.Check(ctx, "gus", 101); !errors.As(err, &qe) || !qe.NeverFits() {
			t.Fatalf("a check above the whole quota: %v, want never fits", err)
		}
		// Given back only while held: once, then a refused no-op.
		b := spend.Reservation{ID: "t_d.a1", Tokens: 40}
		hb, err := q.Reserve(ctx, "gus", b)
		if err != nil {
			t.Fatal(err)
		}
		e.Counter.Reset()
		for i, want := range []bool{true, false} {
			if ok, err := q.SettleIfReserved(ctx, "gus", hb, b, spend.Usage{}); err != nil || ok != want {
				t.Fatalf("give-back %d: %v, %v; want %v", i, ok, err, want)
			}
		}
		if c := e.Counter.Calls(); c["DynamoDB.UpdateItem"] != 2 || c["DynamoDB.GetItem"] != 0 {
			t.Fatalf("two give-backs made %v, want two UpdateItems and no read", c)
		}
		if used, err := q.Used(ctx, "gus"); err != nil || used != 0 {
			t.Fatalf("gus used %d (%v) after the give-back, want 0", used, err)
		}
		if q.Today() != hb {
			t.Fatalf("today's hold %+v, want %+v", q.Today(), hb)
		}
		if _, err := q.SettleIfReserved(ctx, "gus", spend.QuotaHold{}, b, spend.Usage{}); err == nil {
			t.Fatal("a give-back without a hold succeeded")
		}
	})
}

// TestQuotaCallNeed: a call's maximum in the quota's unit — its tokens,
// or their price under a USD quota (unknown without the price table or
// for a model it does not price).
func TestQuotaCallNeed(t *testing.T) {
	cfg, err := spend.ParseConfig([]byte(`{"models":{"m":{"input_usd_per_mtok":3,"output_usd_per_mtok":15}},"daily_quota":{"usd":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	db := struct{ spend.DB }{}
	tokens, _ := spend.NewQuotas(spend.QuotasConfig{DB: db, TasksTable: "t", Quota: spend.Quota{Unit: spend.UnitTokens, Limit: 10}})
	usd, _ := spend.NewQuotas(spend.QuotasConfig{DB: db, TasksTable: "t", Quota: *cfg.Quota, Prices: cfg})
	bare, _ := spend.NewQuotas(spend.QuotasConfig{DB: db, TasksTable: "t", Quota: *cfg.Quota})
	for _, c := range []struct {
		q     *spend.Quotas
		model string
		want  int64
		ok    bool
	}{
		{tokens, "", 1_000_100, true},
		{usd, "m", 3_000_000 + 1_500, true}, // 1,000,000 input at $3/M, 100 output at $15/M, in micros
		{usd, "other", 0, false},
		{bare, "m", 0, false},
	} {
		if got, ok := c.q.CallNeed(c.model, 1_000_000, 100); got != c.want || ok != c.ok {
			t.Errorf("CallNeed(%q) under %+v: %d, %v; want %d, %v", c.model, c.q.Quota(), got, ok, c.want, c.ok)
		}
	}
}
