package lambdaenv

import (
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/spend"
)

// The template's per-caller daily token quota (SPEND_DAILY_QUOTA_TOKENS)
// is the quota unless SPEND_CONFIG sets its own; 0 turns it off; a value
// that is not a whole number is an error, never silently no quota.
func TestSpendConfigDailyQuotaTokens(t *testing.T) {
	const prices = `{"models":{"m":{"input_usd_per_mtok":3,"output_usd_per_mtok":15}}}`
	const usd = `{"models":{"m":{"input_usd_per_mtok":3,"output_usd_per_mtok":15}},"daily_quota":{"usd":25}}`
	for _, c := range []struct {
		raw, tokens string
		want        *spend.Quota
		models      int
	}{
		{prices, "2000000", &spend.Quota{Unit: spend.UnitTokens, Limit: 2_000_000}, 1},
		{"", "2000000", &spend.Quota{Unit: spend.UnitTokens, Limit: 2_000_000}, 0},
		{usd, "2000000", &spend.Quota{Unit: spend.UnitUSD, Limit: 25_000_000}, 1},
		{prices, "0", nil, 1},
		{prices, "", nil, 1},
	} {
		cfg, err := SpendConfigOf(c.raw, c.tokens)
		if err != nil || cfg == nil {
			t.Fatalf("%q, %q: %v, %v", c.raw, c.tokens, cfg, err)
		}
		if (cfg.Quota == nil) != (c.want == nil) || (c.want != nil && *cfg.Quota != *c.want) || len(cfg.Models()) != c.models {
			t.Errorf("%q, %q: quota %+v, %d models; want %+v, %d", c.raw, c.tokens, cfg.Quota, len(cfg.Models()), c.want, c.models)
		}
	}
	if cfg, err := SpendConfigOf("", "0"); cfg != nil || err != nil {
		t.Errorf("no document, no quota: %v, %v; want nothing configured", cfg, err)
	}
	for _, bad := range []string{"-1", "2e6", "1.5", "lots"} {
		if _, err := SpendConfigOf(prices, bad); err == nil || !strings.Contains(err.Error(), "SPEND_DAILY_QUOTA_TOKENS") {
			t.Errorf("SPEND_DAILY_QUOTA_TOKENS=%q: %v, want an error naming it", bad, err)
		}
	}
}
