package spend

import "github.com/taskledger/taskledger/pkg/ledger"

// TaskKey is the budget key of one task's own spend (Accountant.Reserve
// and Settle with it record what the task's attempts used), named by
// ledger.Task.OwnBudget (TaskKeyOf).
func TaskKey(taskID string) string { return taskID }

// ChainKey is the budget key of a regenerate chain, named after its root
// task: "chain.<name>", the name ledger.Task.ChainBudget (ChainKeyOf). Every task of the chain (the root included)
// reserves on it, so the chain's budget bounds all of them together.
func ChainKey(rootID string) string { return "chain." + rootID }

// ChainKeyOf is the budget key of t's regenerate chain: ChainKey of
// t.ChainBudget(), the root's id and creation — a task id reused after
// its retention names a new chain, with a budget of its own.
func ChainKeyOf(t *ledger.Task) string { return ChainKey(t.ChainBudget()) }

// TaskKeyOf is the budget key of t's own spend: TaskKey of t.OwnBudget().
func TaskKeyOf(t *ledger.Task) string { return TaskKey(t.OwnBudget()) }
