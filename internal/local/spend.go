package local

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/lambdaenv"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/internal/worker"
)

// wireSpend gives the local submit handler and worker the spend accounting
// the deployed functions get from SPEND_CONFIG and SPEND_DAILY_QUOTA_TOKENS
// (lambdaenv.SpendConfigOf): raw, or when empty the template's SpendConfig
// default (which prices the simulated provider's model), and tokens, the
// per-caller daily token quota ("" or "0": none).
func wireSpend(tpl *stack.Template, raw, tokens string, db *dynamodb.Client, tasksTable string, submit *api.Handler, work *worker.Handler) error {
	if raw == "" {
		if p, ok := tpl.Section("Parameters")["SpendConfig"].(map[string]any); ok {
			raw, _ = p["Default"].(string)
		}
	}
	cfg, err := lambdaenv.SpendConfigOf(raw, strings.TrimSpace(tokens))
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	if cfg == nil {
		return nil
	}
	acct, err := spend.NewAccountant(spend.AccountantConfig{DB: db, TasksTable: tasksTable})
	if err != nil {
		return err
	}
	var q *spend.Quotas
	if cfg.Quota != nil {
		if q, err = spend.NewQuotas(spend.QuotasConfig{DB: db, TasksTable: tasksTable, Quota: *cfg.Quota, Prices: cfg}); err != nil {
			return err
		}
	}
	submit.Budgets, submit.Quotas = acct, q
	work.Spend = &worker.Spend{Prices: cfg, Budgets: acct, Quotas: q}
	return nil
}
