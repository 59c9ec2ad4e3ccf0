package local_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestStackDailyQuotaTokens: make run takes the per-caller daily token
// quota the deployed functions read (SPEND_DAILY_QUOTA_TOKENS:
// local.Options.DailyQuotaTokens), so it can be tried locally. A quota of
// one token cannot hold a call's reservation: the worker parks the task
// over the quota instead of calling the provider.
func TestStackDailyQuotaTokens(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{StatusEvery: -1, DailyQuotaTokens: "1"})
	v := b.submit(t, "quota-1", `{"prompt":"Say hello"}`)
	parked := b.awaitState(t, v.TaskID, "needs_review", 20*time.Second)
	if parked.Error == nil || parked.Error.Class != "quota_exceeded" {
		t.Fatalf("parked with error %+v, want class quota_exceeded", parked.Error)
	}

	// A malformed value is refused at start, naming the setting.
	_, err := local.Start(t.Context(), local.Options{Addr: "127.0.0.1:0", Prefix: testenv.UniquePrefix(), StatusEvery: -1, DailyQuotaTokens: "lots"})
	if err == nil || !strings.Contains(err.Error(), "SPEND_DAILY_QUOTA_TOKENS") {
		t.Fatalf("Start with DailyQuotaTokens \"lots\": %v, want it refused naming SPEND_DAILY_QUOTA_TOKENS", err)
	}
}
