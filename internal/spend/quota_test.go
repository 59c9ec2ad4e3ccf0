package spend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestDailyQuota(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		clock := testenv.NewClock(time.Date(2026, 11, 30, 23, 59, 0, 500_000_000, time.UTC))
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
		if qe.Used != 1000 || qe.Limit != 1000 || qe.Day != "2026-11-30" || qe.RetryAfterSeconds() != 60 {
			t.Fatalf("error %+v (retry after %ds); want 1000/1000 on 2026-11-30, 60 s to midnight", qe, qe.RetryAfterSeconds())
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
		q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: spend.Quota{Unit: spend.UnitUSD, Limit: 1_000_000}})
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
