package local

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/internal/worker"
)

// wireSpend gives the local submit handler and worker the spend accounting
// the deployed functions get from SPEND_CONFIG: raw, or when empty the
// template's SpendConfig default (which prices the simulated provider's
// model).
func wireSpend(tpl *stack.Template, raw string, db *dynamodb.Client, tasksTable string, submit *api.Handler, work *worker.Handler) error {
	if raw == "" {
		if p, ok := tpl.Section("Parameters")["SpendConfig"].(map[string]any); ok {
			raw, _ = p["Default"].(string)
		}
	}
	if raw == "" {
		return nil
	}
	cfg, err := spend.ParseConfig([]byte(raw))
	if err != nil {
		return fmt.Errorf("local: spend config: %w", err)
	}
	acct, err := spend.NewAccountant(spend.AccountantConfig{DB: db, TasksTable: tasksTable})
	if err != nil {
		return err
	}
	var q *spend.Quotas
	if cfg.Quota != nil {
		if q, err = spend.NewQuotas(spend.QuotasConfig{DB: db, TasksTable: tasksTable, Quota: *cfg.Quota}); err != nil {
			return err
		}
	}
	submit.Budgets, submit.Quotas = acct, q
	work.Spend = &worker.Spend{Prices: cfg, Budgets: acct, Quotas: q}
	return nil
}
