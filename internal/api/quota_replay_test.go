package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestReplayIsNeverRefusedByTheQuota: DESIGN §1.2 — a retried submission
// (same caller, same key, same payload) returns the existing task, and a
// task already recorded under the key is answered by Create: nothing
// before it may refuse it. The caller's submit (and regenerate) is accepted
// but the 202 is lost; the task then runs and its call charges the
// caller's daily quota to the limit. The client's retry with the same key
// and body is answered 200 replayed — not 429 quota-exceeded ("nothing was
// written … retry after the next UTC day") from a quota check made before
// the replay lookup, which would tell the client to wait a day for a task
// that is already there.
func TestReplayIsNeverRefusedByTheQuota(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := quotaClock(12 * time.Hour)
		// Room for one call of body("p"): 8,225 tokens reserved.
		quota := spend.Quota{Unit: spend.UnitTokens, Limit: 10_000}
		b := setup(t, e, withSpend(e, clock, &quota))
		onClock(t, b, clock)
		q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: quota, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		root := view(t, b.do(t, submitReq("quota-root", body("p"), asJWT("alice"))))
		regen := b.do(t, regenReq(root.TaskID, "quota-regen", "", asJWT("alice")))
		wantStatus(t, regen, http.StatusAccepted)
		child := view(t, regen)
		// The tasks run; their calls are charged to alice's quota.
		if err := q.Add(context.Background(), "jwt:alice", spend.Usage{InputTokens: 4000, OutputTokens: 6000}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		r := b.do(t, submitReq("quota-root", body("p"), asJWT("alice")))
		if r.StatusCode != http.StatusOK || r.Headers[api.HeaderIdempotentReplayed] != "true" {
			t.Errorf("retried submit (same key, same body) of existing task %s: %d %s; want 200 replayed", root.TaskID, r.StatusCode, r.Body)
		}
		r = b.do(t, regenReq(root.TaskID, "quota-regen", "", asJWT("alice")))
		if r.StatusCode != http.StatusOK || r.Headers[api.HeaderIdempotentReplayed] != "true" {
			t.Errorf("retried regenerate (same key, same body) of existing task %s: %d %s; want 200 replayed", child.TaskID, r.StatusCode, r.Body)
		}
	})
}
