package lambdaenv

import (
	"fmt"
	"strconv"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/spend"
)

// Spend is the spend accounting built from SPEND_CONFIG and
// SPEND_DAILY_QUOTA_TOKENS (DESIGN §13): the price table, the budget
// accountant and, when a daily quota is configured, the per-caller quota
// (nil otherwise).
type Spend struct {
	Prices  *spend.Config
	Budgets *spend.Accountant
	Quotas  *spend.Quotas
}

// LoadSpend reads SPEND_CONFIG (the JSON document of spend.ParseConfig) and
// SPEND_DAILY_QUOTA_TOKENS (the template's DailyQuotaTokensPerCaller: a
// per-caller daily token quota, 0 or empty for none) and builds the
// accounting on b's tasks table (SpendConfigOf). Neither set means no
// spend accounting: nil, and a budgeted task cannot be priced (the worker
// parks it provider_config rather than run it unbudgeted).
func LoadSpend(b *Base, getenv func(string) string) (*Spend, error) {
	cfg, err := SpendConfigOf(getenv("SPEND_CONFIG"), getenv("SPEND_DAILY_QUOTA_TOKENS"))
	if cfg == nil || err != nil {
		return nil, err
	}
	db := awsclient.DynamoDB(b.AWS)
	s := &Spend{Prices: cfg}
	if s.Budgets, err = spend.NewAccountant(spend.AccountantConfig{DB: db, TasksTable: b.TasksTable}); err != nil {
		return nil, err
	}
	if cfg.Quota != nil {
		if s.Quotas, err = spend.NewQuotas(spend.QuotasConfig{DB: db, TasksTable: b.TasksTable, Quota: *cfg.Quota, Prices: cfg}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// SpendConfigOf is the spend configuration of a SPEND_CONFIG document
// (raw; may be empty) and a SPEND_DAILY_QUOTA_TOKENS value (tokens: a
// whole number; "" or 0 for none). The document's own daily_quota, when it
// sets one (it can count USD), is the quota; otherwise tokens, when
// positive, is a daily token quota per caller — with no document, over an
// empty price table (a token quota needs no prices). nil when neither
// configures anything.
func SpendConfigOf(raw, tokens string) (*spend.Config, error) {
	var limit int64
	if tokens != "" {
		n, err := strconv.ParseInt(tokens, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("SPEND_DAILY_QUOTA_TOKENS: %q is not a whole number of tokens (0 for no daily quota)", tokens)
		}
		limit = n
	}
	if raw == "" && limit == 0 {
		return nil, nil
	}
	cfg := &spend.Config{}
	if raw != "" {
		var err error
		if cfg, err = spend.ParseConfig([]byte(raw)); err != nil {
			return nil, fmt.Errorf("SPEND_CONFIG: %w", err)
		}
	}
	if cfg.Quota == nil && limit > 0 {
		cfg.Quota = &spend.Quota{Unit: spend.UnitTokens, Limit: limit}
	}
	return cfg, nil
}
