package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestOverQuotaKeyReuseWritesNothing: a request gets through the daily
// quota when a task is recorded under its key ("a replay is never refused
// by the quota"), whatever the request's payload. A key reuse — same key,
// another document or input — by a caller over its quota must still write
// nothing: answered 422 or 429 before the new document is resolved and
// ADOPTED (S3 CopyObject into the content-addressed inputs/ prefix) or an
// offloaded input placed, or a caller over its quota could keep writing
// objects into the payload bucket with a recorded key.
func TestOverQuotaKeyReuseWritesNothing(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		clock := quotaClock(12 * time.Hour)
		// Room for one call of body("p"): 8,225 tokens reserved.
		quota := spend.Quota{Unit: spend.UnitTokens, Limit: 10_000}
		st := e.Payloads(t, 64) // inputs over 64 B go to S3
		b := setup(t, e, withSpend(e, clock, &quota))
		b.h.Payloads = st // (withHandler options replace each other)
		onClock(t, b, clock)
		q, err := spend.NewQuotas(spend.QuotasConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Quota: quota, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		docA := []byte("a,b\n1,2\n")
		putUpload(t, uploadView(t, b.do(t, uploadReq(declare("qa", docA, "text/csv"), asJWT("alice")))), docA)
		wantStatus(t, b.do(t, submitReq("quota-doc", docBody("sum it", "qa"), asJWT("alice"))), http.StatusAccepted)
		if err := q.Add(ctx, "jwt:alice", spend.Usage{InputTokens: 4000, OutputTokens: 6000}); err != nil {
			t.Fatal(err)
		}
		docB := []byte("a,b\n" + strings.Repeat("3,4\n", 50))
		putUpload(t, uploadView(t, b.do(t, uploadReq(declare("qb", docB, "text/csv"), asJWT("alice")))), docB)
		// Control: a new key over the quota is refused before anything.
		wantProblem(t, b.do(t, submitReq("quota-doc-new", docBody("sum it", "qb"), asJWT("alice"))), http.StatusTooManyRequests, api.TypeQuotaExceeded)

		e.Counter.Reset()
		resp := b.do(t, submitReq("quota-doc", docBody("sum it", "qb"), asJWT("alice")))
		calls := e.Counter.Calls()
		_, gerr := st.Get(ctx, payload.Ref{Bucket: e.Names.PayloadBucket, Key: payload.InputKey(payload.Digest(docB)), SHA256: payload.Digest(docB), Size: int64(len(docB))})
		writes := calls["S3.CopyObject"] + calls["S3.PutObject"] + calls["S3.PutObjectTagging"] + calls["DynamoDB.UpdateItem"] // (Create's refused conditional PutItem writes nothing)
		if (resp.StatusCode != http.StatusUnprocessableEntity && resp.StatusCode != http.StatusTooManyRequests) || writes != 0 || gerr == nil {
			t.Errorf("key reuse (another document) by a caller over its quota: %d %s; AWS calls %v; the new document adopted into inputs/: %v — want 422 or 429 and nothing written",
				resp.StatusCode, resp.Body, calls, gerr == nil)
		}

		// The same with another input, large enough to be offloaded:
		// placeInput puts it in S3 before Create answers 422.
		large := strings.Repeat("a long prompt ", 20)
		e.Counter.Reset()
		resp = b.do(t, submitReq("quota-doc", body(large), asJWT("alice")))
		calls = e.Counter.Calls()
		if (resp.StatusCode != http.StatusUnprocessableEntity && resp.StatusCode != http.StatusTooManyRequests) || calls["S3.PutObject"] != 0 {
			t.Errorf("key reuse (another, offloaded input) by a caller over its quota: %d %s; AWS calls %v — want 422 or 429 and nothing written",
				resp.StatusCode, resp.Body, calls)
		}
	})
}
