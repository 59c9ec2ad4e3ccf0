package api_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestSubmitRefusesACallTheDailyQuotaCanNeverHold: the worker reserves
// every call's maximum on its caller's daily quota before the call; a task
// whose one call reserves more than the whole quota (here 8,225 tokens:
// the prompt's bytes + 32, and 8,192 output tokens since max_tokens is
// unset, against a 1,000-token quota) can never run on any day. Submit
// refuses such a task for a token budget (budgetCoversOneCall) and for the
// model's tokens_per_minute; under the quota it was accepted 202 and then
// parked by the worker — a task accepted that could only ever be parked.
func TestSubmitRefusesACallTheDailyQuotaCanNeverHold(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := quotaClock(12 * time.Hour)
		quota := spend.Quota{Unit: spend.UnitTokens, Limit: 1000}
		b := setup(t, e, withSpend(e, clock, &quota))
		onClock(t, b, clock)
		r := b.do(t, submitReq("quota-never-fits", body("p"), asJWT("alice")))
		if r.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("a task whose one call reserves 8225 tokens under a 1000-token daily quota: %d %s; want 422, nothing recorded", r.StatusCode, r.Body)
		}
		if _, err := b.l.Get(context.Background(), b.l.TaskID("jwt:alice", "quota-never-fits")); err == nil {
			t.Fatal("the refused task was recorded")
		}
	})
}

// TestSubmitWhileCallsInFlightHoldTheQuotaIsNotToldToWaitADay: the
// caller's 1,000-token quota is held entirely by one call in flight (its
// reservation; nothing is settled yet, and the call may settle at a few
// tokens within seconds). A submit then is refused 429 "used 1000 of its
// daily quota … Retry after … the next UTC day" with Retry-After of twelve
// hours: the caller is told it used what it only reserved, and to wait a
// day for room that frees when the call settles.
func TestSubmitWhileCallsInFlightHoldTheQuotaIsNotToldToWaitADay(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		clock := quotaClock(12 * time.Hour)
		quota := spend.Quota{Unit: spend.UnitTokens, Limit: 1000}
		b := setup(t, e, withSpend(e, clock, &quota))
		onClock(t, b, clock)
		q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: quota, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		// A call in flight, as the worker holds it.
		if _, err := q.Reserve(ctx, "jwt:alice", spend.Reservation{ID: "t_inflight.a1", Tokens: 1000}); err != nil {
			t.Fatal(err)
		}
		r := b.do(t, submitReq("quota-inflight", body("p"), asJWT("alice")))
		if r.StatusCode != http.StatusTooManyRequests {
			return // accepted (the worker's reservation enforces the quota): nothing misstated
		}
		secs, _ := strconv.Atoi(r.Headers["Retry-After"])
		if time.Duration(secs)*time.Second >= time.Hour {
			t.Fatalf("a submit while only a call in flight holds the quota (0 tokens settled): 429 Retry-After %ds (%s) — told to wait for the next UTC day, for room that frees when the call settles",
				secs, r.Body)
		}
	})
}
