package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestQuotaReplayAnsweredFromTheRecordedTask: an over-quota caller's exact
// retry (same documents, budget) is answered 200 from c.recorded without
// writes; a key whose task is past retention is not "recorded" (429,
// nothing written); a regenerate retry of a budgeted parent over the quota
// replays without extending the chain.
func TestQuotaReplayAnsweredFromTheRecordedTask(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		clock := quotaClock(12 * time.Hour)
		// Room for one call of body("p"): 8,225 tokens reserved.
		quota := spend.Quota{Unit: spend.UnitTokens, Limit: 10_000}
		st := e.Payloads(t, 64)
		b := setup(t, e, withSpend(e, clock, &quota))
		b.h.Payloads = st
		onClock(t, b, clock)
		q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: quota, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		docA := []byte("a,b\n1,2\n")
		putUpload(t, uploadView(t, b.do(t, uploadReq(declare("ea", docA, "text/csv"), asJWT("alice")))), docA)
		first := view(t, b.do(t, submitReq("e-quota-doc", docBody("sum it", "ea"), asJWT("alice"))))
		root := view(t, b.do(t, submitReq("e-quota-root", budgetBody("p", `{"max_total_tokens":10000}`), asJWT("alice"))))
		child := view(t, b.do(t, regenReq(root.TaskID, "e-quota-regen", "", asJWT("alice"))))
		gone := view(t, b.do(t, submitReq("e-quota-gone", body("x"), asJWT("alice"))))
		wantStatus(t, b.do(t, cancelReq(gone.TaskID, asJWT("alice"))), http.StatusOK)
		if err := q.Add(ctx, "jwt:alice", spend.Usage{InputTokens: 4000, OutputTokens: 6000}); err != nil {
			t.Fatal(err)
		}

		e.Counter.Reset()
		r := b.do(t, submitReq("e-quota-doc", docBody("sum it", "ea"), asJWT("alice")))
		calls := e.Counter.Calls()
		if r.StatusCode != http.StatusOK || r.Headers[api.HeaderIdempotentReplayed] != "true" || view(t, r).TaskID != first.TaskID ||
			calls["S3.CopyObject"]+calls["S3.PutObject"]+calls["DynamoDB.UpdateItem"]+calls["DynamoDB.PutItem"] != 0 {
			t.Errorf("over-quota exact retry with documents: %d %s; calls %v; want 200 replayed, no writes", r.StatusCode, r.Body, calls)
		}
		e.Counter.Reset()
		r = b.do(t, regenReq(root.TaskID, "e-quota-regen", "", asJWT("alice")))
		calls = e.Counter.Calls()
		if r.StatusCode != http.StatusOK || view(t, r).TaskID != child.TaskID || calls["DynamoDB.UpdateItem"]+calls["DynamoDB.PutItem"] != 0 {
			t.Errorf("over-quota regenerate retry: %d %s; calls %v; want 200 replayed, no writes", r.StatusCode, r.Body, calls)
		}
		r = b.do(t, regenReq(root.TaskID, "e-quota-regen", `{"input":{"prompt":"other"}}`, asJWT("alice")))
		wantProblem(t, r, http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)

		clock.Advance(ledger.DefaultRetention + time.Hour)
		if err := q.Add(ctx, "jwt:alice", spend.Usage{InputTokens: 4000, OutputTokens: 6000}); err != nil {
			t.Fatal(err)
		}
		e.Counter.Reset()
		wantProblem(t, b.do(t, submitReq("e-quota-gone", body("x"), asJWT("alice"))), http.StatusTooManyRequests, api.TypeQuotaExceeded)
		if calls := e.Counter.Calls(); calls["DynamoDB.PutItem"] != 0 {
			t.Errorf("over-quota submit of an expired key wrote: %v", calls)
		}
	})
}
