package api_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestSubmitQuotaCountsSettledUsageAgainstTheCall: a submit is refused
// 429 (Retry-After to the next UTC day) when the caller's settled usage
// today leaves no room for one call of the task — settled usage only
// grows within the day — and never for the reservations of calls in
// flight, which free when their calls settle (the worker waits for them).
// A smaller call that fits what is left is accepted.
func TestSubmitQuotaCountsSettledUsageAgainstTheCall(t *testing.T) {
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
		// A call in flight holds the whole quota; nothing is settled.
		inFlight := spend.Reservation{ID: "t_inflight.a1", Tokens: 1000}
		hold, err := q.Reserve(ctx, "jwt:alice", inFlight)
		if err != nil {
			t.Fatal(err)
		}
		// 1 + 32 input tokens and 100 output tokens: 133.
		wantStatus(t, b.do(t, submitReq("while-in-flight", withMaxTokens("p", 100), asJWT("alice"))), http.StatusAccepted)

		// The call settles at 900 tokens: 100 are left, less than 133.
		if err := q.Settle(ctx, "jwt:alice", hold, inFlight, spend.Usage{InputTokens: 400, OutputTokens: 500}); err != nil {
			t.Fatal(err)
		}
		resp := b.do(t, submitReq("no-room", withMaxTokens("p", 100), asJWT("alice")))
		p := wantProblem(t, resp, http.StatusTooManyRequests, api.TypeQuotaExceeded)
		if secs, _ := strconv.Atoi(resp.Headers["Retry-After"]); secs != 12*3600 {
			t.Errorf("Retry-After %q, want the 43200 s to the next UTC day", resp.Headers["Retry-After"])
		}
		if !strings.Contains(p.Detail, "used 900 tokens of its daily quota of 1000 tokens") || !strings.Contains(p.Detail, "no room for one provider call of this task (up to 133 tokens)") {
			t.Errorf("detail %q", p.Detail)
		}
		// 33 + 50 = 83 tokens fit the 100 left.
		wantStatus(t, b.do(t, submitReq("fits", withMaxTokens("p", 50), asJWT("alice"))), http.StatusAccepted)
	})
}

// TestSubmitRefusesDocumentsAndRegeneratesTheDailyQuotaCanNeverHold: the
// call's bound counts its documents (checked once they are resolved,
// before they are copied) and a regenerate's own input: above the
// caller's whole daily quota, 422 exceeds-daily-quota and nothing
// written, as for a prompt-only submit.
func TestSubmitRefusesDocumentsAndRegeneratesTheDailyQuotaCanNeverHold(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := quotaClock(12 * time.Hour)
		quota := spend.Quota{Unit: spend.UnitTokens, Limit: 1000}
		b := setup(t, e, withSpend(e, clock, &quota))
		b.h.Payloads = e.Payloads(t, 0) // (withHandler options replace each other)
		onClock(t, b, clock)
		pdf := []byte("%PDF-1.7 a contract of unknown length")
		putUpload(t, uploadView(t, b.do(t, uploadReq(declare("contract", pdf, "application/pdf"), asJWT("alice")))), pdf)
		objects := bucketObjects(t, e)

		// A pdf is bounded by 200,000 tokens.
		p := wantProblem(t, b.do(t, submitReq("pdf", withMaxTokens("summarise it", 10, "contract"), asJWT("alice"))), http.StatusUnprocessableEntity, api.TypeExceedsDailyQuota)
		if p.Field != "documents" || !strings.Contains(p.Detail, "daily quota of 1000 tokens") || !strings.Contains(p.Detail, "nothing was recorded") {
			t.Errorf("field %q detail %q", p.Field, p.Detail)
		}
		unchanged(t, e, "refused pdf submit", 0, objects)

		parent := view(t, b.do(t, submitReq("parent", withMaxTokens("p", 100), asJWT("alice"))))
		// The regenerate's input leaves max_tokens unset: 8,192 output tokens.
		p = wantProblem(t, b.do(t, regenReq(parent.TaskID, "regen", `{"input":{"prompt":"p"}}`, asJWT("alice"))), http.StatusUnprocessableEntity, api.TypeExceedsDailyQuota)
		if p.Field != "input" || !strings.Contains(p.Detail, "up to 8225 tokens") {
			t.Errorf("regenerate: field %q detail %q", p.Field, p.Detail)
		}
		unchanged(t, e, "refused regenerate", 1, objects)
	})
}
