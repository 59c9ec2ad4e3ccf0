package local_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestStackDailyQuotaTokens: make run takes the per-caller daily token
// quota the deployed functions read (SPEND_DAILY_QUOTA_TOKENS:
// local.Options.DailyQuotaTokens), so it can be tried locally: its worker
// charges a call to the quota, and its submit refuses a task whose call
// the settled usage leaves no room for (429), or that no day has room for
// (422: a call reserving more than the whole quota).
func TestStackDailyQuotaTokens(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{StatusEvery: -1, DailyQuotaTokens: "100"})
	// 9 prompt bytes + 32 and 50 output tokens: 91 of the 100 reserved;
	// the simulated provider reports 2 + 24.
	const input = `{"prompt":"Say hello","max_tokens":50}`
	v := b.submit(t, "quota-1", input)
	b.awaitState(t, v.TaskID, "completed", 20*time.Second)
	post := func(key, input string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, b.st.URL+"/tasks", strings.NewReader(`{"kind":"generate","input":`+input+`}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatalf("POST /tasks: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// The worker charged the call's 26 tokens: no room for another 91.
	if code, body := post("quota-2", input); code != http.StatusTooManyRequests || !strings.Contains(body, "quota-exceeded") {
		t.Fatalf("a second call after the first settled: %d %s, want 429 quota-exceeded", code, body)
	}
	// 8,192 output tokens when max_tokens is unset: never within 100.
	if code, body := post("quota-3", `{"prompt":"Say hello"}`); code != http.StatusUnprocessableEntity || !strings.Contains(body, "exceeds-daily-quota") {
		t.Fatalf("a call larger than the whole quota: %d %s, want 422 exceeds-daily-quota", code, body)
	}

	// A malformed value is refused at start, naming the setting.
	_, err := local.Start(t.Context(), local.Options{Addr: "127.0.0.1:0", Prefix: testenv.UniquePrefix(), StatusEvery: -1, DailyQuotaTokens: "lots"})
	if err == nil || !strings.Contains(err.Error(), "SPEND_DAILY_QUOTA_TOKENS") {
		t.Fatalf("Start with DailyQuotaTokens \"lots\": %v, want it refused naming SPEND_DAILY_QUOTA_TOKENS", err)
	}
}
