package spend

// TaskKey is the budget key of one task's own spend (Accountant.Reserve
// and Settle with it record what the task's attempts used).
func TaskKey(taskID string) string { return taskID }

// ChainKey is the budget key of a regenerate chain, named after its root
// task: "chain.<root id>". Every task of the chain (the root included)
// reserves on it, so the chain's budget bounds all of them together.
func ChainKey(rootID string) string { return "chain." + rootID }
