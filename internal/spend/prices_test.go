package spend_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/spend"
)

func TestParseUSD(t *testing.T) {
	t.Parallel()
	good := map[string]spend.Micros{"0": 0, "15": 15_000_000, "0.25": 250_000, "3.000001": 3_000_001, "0.1": 100_000}
	for s, want := range good {
		got, err := spend.ParseUSD(s)
		if err != nil || got != want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "-1", "1e3", "0.0000001", ".5", "5.", " 1", "1,5", "+1", "99999999999999"} {
		if _, err := spend.ParseUSD(s); err == nil {
			t.Errorf("ParseUSD(%q) accepted", s)
		}
	}
	if s := spend.Micros(12_345).String(); s != "0.012345" {
		t.Errorf("String = %q", s)
	}
	if s := spend.Micros(-1_500_000).String(); s != "-1.500000" {
		t.Errorf("String = %q", s)
	}
}

const cfgDoc = `{"models": {
  "m-cheap": {"input_usd_per_mtok": 0.25, "output_usd_per_mtok": 1.25},
  "m-big":   {"input_usd_per_mtok": 3,    "output_usd_per_mtok": 15}
}, "daily_quota": {"usd": "25.50"}}`

func mustConfig(t *testing.T, doc string) *spend.Config {
	t.Helper()
	c, err := spend.ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseConfigAndPrice(t *testing.T) {
	t.Parallel()
	c := mustConfig(t, strings.Replace(cfgDoc, `"25.50"`, `25.50`, 1))
	if got := c.Models(); len(got) != 2 || got[0] != "m-big" {
		t.Fatalf("models %v", got)
	}
	if c.Quota == nil || c.Quota.Unit != spend.UnitUSD || c.Quota.Limit != 25_500_000 {
		t.Fatalf("quota %+v", c.Quota)
	}
	// 1,000 in + 500 out on m-big: 1000*3 + 500*15 = 10,500 micro-dollars.
	u, err := c.Usage("m-big", 1000, 500)
	if err != nil || u.Cost != 10_500 || u.Tokens() != 1500 {
		t.Fatalf("usage %+v, %v; want cost 10500 micros", u, err)
	}
	// Rounded up to the micro-dollar: 3 input tokens at $0.25/Mtok is 0.75 micros.
	if u, _ := c.Usage("m-cheap", 3, 0); u.Cost != 1 {
		t.Fatalf("3 cheap tokens cost %d micros, want 1 (rounded up)", u.Cost)
	}
	if u, _ := c.Usage("m-cheap", 0, 0); u.Cost != 0 {
		t.Fatalf("nothing costs %d", u.Cost)
	}
	// No float drift: a million calls of 1 token each sum exactly.
	var sum spend.Micros
	for range 1_000_000 {
		u, _ := c.Usage("m-big", 1_000_000, 0)
		sum += u.Cost
	}
	if sum != 3_000_000*spend.MicrosPerUSD {
		t.Fatalf("sum %s, want exactly 3000000.000000", sum)
	}
	var um *spend.UnknownModelError
	if _, err := c.Usage("nope", 1, 1); !errors.As(err, &um) || um.Model != "nope" {
		t.Fatalf("unknown model: %v", err)
	}
	if _, err := c.Usage("m-big", -1, 0); err == nil {
		t.Fatal("negative tokens accepted")
	}
	tq := mustConfig(t, `{"models":{"m":{"input_usd_per_mtok":1,"output_usd_per_mtok":2}},"daily_quota":{"tokens":5000}}`)
	if tq.Quota.Unit != spend.UnitTokens || tq.Quota.Limit != 5000 || tq.Quota.Of(spend.Usage{InputTokens: 2, OutputTokens: 3, Cost: 99}) != 5 {
		t.Fatalf("token quota %+v", tq.Quota)
	}
	if nq := mustConfig(t, `{"models":{"m":{"input_usd_per_mtok":1,"output_usd_per_mtok":2}}}`); nq.Quota != nil {
		t.Fatal("no daily_quota should mean no quota")
	}
}

func TestParseConfigStrict(t *testing.T) {
	t.Parallel()
	m := `"m":{"input_usd_per_mtok":1,"output_usd_per_mtok":2}`
	bad := map[string]string{
		"empty":              `{}`,
		"no models":          `{"models":{}}`,
		"unknown field":      `{"models":{` + m + `},"extra":1}`,
		"unknown price key":  `{"models":{"m":{"input_usd_per_mtok":1,"output_usd_per_mtok":2,"cached":1}}}`,
		"missing output":     `{"models":{"m":{"input_usd_per_mtok":1}}}`,
		"negative":           `{"models":{"m":{"input_usd_per_mtok":-1,"output_usd_per_mtok":2}}}`,
		"exponent":           `{"models":{"m":{"input_usd_per_mtok":1e2,"output_usd_per_mtok":2}}}`,
		"too precise":        `{"models":{"m":{"input_usd_per_mtok":0.0000001,"output_usd_per_mtok":2}}}`,
		"blank model":        `{"models":{" ":{"input_usd_per_mtok":1,"output_usd_per_mtok":2}}}`,
		"null model":         `{"models":{"m":null}}`,
		"trailing":           `{"models":{` + m + `}} {}`,
		"both quota units":   `{"models":{` + m + `},"daily_quota":{"tokens":5,"usd":1}}`,
		"neither quota unit": `{"models":{` + m + `},"daily_quota":{}}`,
		"zero quota":         `{"models":{` + m + `},"daily_quota":{"tokens":0}}`,
		"fractional tokens":  `{"models":{` + m + `},"daily_quota":{"tokens":1.5}}`,
		"not json":           `models: {}`,
	}
	for name, doc := range bad {
		_, err := spend.ParseConfig([]byte(doc))
		var ce *spend.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: got %v, want *ConfigError", name, err)
		}
	}
	_, err := spend.ParseConfig([]byte(`{"models":{"m":{"input_usd_per_mtok":"x","output_usd_per_mtok":2}}}`))
	var ce *spend.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("string price: %v", err)
	}
}
