package ledger_test

import (
	"testing"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// Budget records are named by the creation of their task (or chain root)
// from BudgetNamesSince on; older tasks, and regenerates recorded without
// chain_epoch_ms, keep the names they were created with.
func TestBudgetNames(t *testing.T) {
	t.Parallel()
	since := ledger.BudgetNamesSince
	for _, c := range []struct {
		name       string
		task       ledger.Task
		own, chain string
	}{
		{"root", ledger.Task{TaskID: "t_r", CreatedMs: since}, "t_r.mx58pts0", "t_r.mx58pts0"},
		{"root before", ledger.Task{TaskID: "t_r", CreatedMs: since - 1}, "t_r", "t_r"},
		{"regenerate", ledger.Task{TaskID: "t_c", CreatedMs: since + 36, ChainRoot: "t_r", ChainEpochMs: since}, "t_c.mx58ptt0", "t_r.mx58pts0"},
		{"regenerate of an older chain", ledger.Task{TaskID: "t_c", CreatedMs: since + 36, ChainRoot: "t_r", ChainEpochMs: since - 1}, "t_c.mx58ptt0", "t_r"},
		{"regenerate without chain_epoch_ms", ledger.Task{TaskID: "t_c", CreatedMs: since - 5, ChainRoot: "t_r"}, "t_c", "t_r"},
	} {
		if got := c.task.OwnBudget(); got != c.own {
			t.Errorf("%s: OwnBudget %q, want %q", c.name, got, c.own)
		}
		if got := c.task.ChainBudget(); got != c.chain {
			t.Errorf("%s: ChainBudget %q, want %q", c.name, got, c.chain)
		}
	}
}
