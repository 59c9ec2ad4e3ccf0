package lambdaenv

import (
	"fmt"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/spend"
)

// Spend is the spend accounting built from SPEND_CONFIG (DESIGN §13): the
// price table, the budget accountant and, when the document sets a
// daily_quota, the per-caller quota (nil otherwise).
type Spend struct {
	Prices  *spend.Config
	Budgets *spend.Accountant
	Quotas  *spend.Quotas
}

// LoadSpend reads SPEND_CONFIG (the JSON document of spend.ParseConfig) and
// builds the accounting on b's tasks table. An empty value means no price
// table: nil, and a budgeted task cannot be priced (the worker parks it
// provider_config rather than run it unbudgeted).
func LoadSpend(b *Base, getenv func(string) string) (*Spend, error) {
	raw := getenv("SPEND_CONFIG")
	if raw == "" {
		return nil, nil
	}
	cfg, err := spend.ParseConfig([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("SPEND_CONFIG: %w", err)
	}
	db := awsclient.DynamoDB(b.AWS)
	s := &Spend{Prices: cfg}
	if s.Budgets, err = spend.NewAccountant(spend.AccountantConfig{DB: db, TasksTable: b.TasksTable}); err != nil {
		return nil, err
	}
	if cfg.Quota != nil {
		if s.Quotas, err = spend.NewQuotas(spend.QuotasConfig{DB: db, TasksTable: b.TasksTable, Quota: *cfg.Quota}); err != nil {
			return nil, err
		}
	}
	return s, nil
}
