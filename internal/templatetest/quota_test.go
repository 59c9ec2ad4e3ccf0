package templatetest

import (
	"reflect"
	"testing"

	"github.com/taskledger/taskledger/internal/lambdaenv"
	"github.com/taskledger/taskledger/internal/spend"
)

// A default deploy limits every caller's daily tokens: the
// DailyQuotaTokensPerCaller parameter (2,000,000 by default) reaches the
// submit function (its 429) and the worker (its reservations) as
// SPEND_DAILY_QUOTA_TOKENS, and with the template's SpendConfig default it
// configures a per-caller token quota. 0 turns it off, and then an output
// of the stack says so.
func TestDailyQuotaOnByDefault(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	params := tpl.Section("Parameters")
	p, _ := params["DailyQuotaTokensPerCaller"].(map[string]any)
	if p == nil {
		t.Fatal("no DailyQuotaTokensPerCaller parameter: a default deploy has no per-caller daily quota")
	}
	// A whole number, exactly: the condition below compares it with "0",
	// and the functions refuse anything else at start.
	if p["Type"] != "String" || p["Default"] != "2000000" || p["AllowedPattern"] != "^(0|[1-9][0-9]{0,14})$" {
		t.Errorf("DailyQuotaTokensPerCaller = %v; want a whole-number String, default 2000000", p)
	}
	spendDefault, _ := params["SpendConfig"].(map[string]any)["Default"].(string)
	cfg, err := lambdaenv.SpendConfigOf(spendDefault, "2000000")
	if err != nil || cfg == nil || cfg.Quota == nil || *cfg.Quota != (spend.Quota{Unit: spend.UnitTokens, Limit: 2_000_000}) {
		t.Errorf("the defaults configure %+v (%v); want a daily quota of 2,000,000 tokens per caller", cfg, err)
	}
	fns := tpl.Functions()
	for _, id := range []string{"SubmitFunction", "WorkerFunction"} {
		if got := ref(fns[id].Env["SPEND_DAILY_QUOTA_TOKENS"]); got != "DailyQuotaTokensPerCaller" {
			t.Errorf("%s: SPEND_DAILY_QUOTA_TOKENS is %v, want Ref DailyQuotaTokensPerCaller", id, fns[id].Env["SPEND_DAILY_QUOTA_TOKENS"])
		}
	}
	cond := tpl.Section("Conditions")["DailyQuotaOff"]
	if want := map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "DailyQuotaTokensPerCaller"}, "0"}}; !reflect.DeepEqual(cond, want) {
		t.Errorf("condition DailyQuotaOff = %v, want %v", cond, want)
	}
	out, _ := tpl.Section("Outputs")["DailyQuotaOff"].(map[string]any)
	if out == nil || out["Condition"] != "DailyQuotaOff" {
		t.Fatalf("output DailyQuotaOff = %v; want the warning, on condition DailyQuotaOff", out)
	}
	if v, _ := out["Value"].(string); len(v) < len("WARNING") || v[:len("WARNING")] != "WARNING" {
		t.Errorf("output DailyQuotaOff value %q; want a warning", v)
	}
}
