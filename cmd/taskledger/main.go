// Command taskledger is the operator's CLI for the task ledger and its
// dead-letter review table: list and read review items, retry a parked task
// or resolve it as completed or failed, read a task, and approve, reject or
// withdraw the approval of a gated task (DESIGN §10; the same ledger
// transactions as the HTTP API, recorded as decided by "operator:<--by>").
//
//	taskledger review list [--limit N] [--cursor C] [--all]
//	taskledger review show <id>
//	taskledger review retry <id> [--note TEXT] [--by NAME]
//	taskledger review resolve <id> --outcome completed|failed --note TEXT [--by NAME]
//	taskledger task get <id>
//	taskledger approve <id> --artifact-sha256 HEX [--edited-result JSON] [--note TEXT] [--by NAME]
//	taskledger reject <id> [--note TEXT] [--by NAME]
//	taskledger withdraw <id> [--note TEXT] [--by NAME]
//
// It works against any endpoint. Table and queue names come from flags
// (--tasks-table, --review-table, --queue-url), else from a deployed stack's
// outputs (--stack NAME: TasksTableName, ReviewTableName, TaskQueueUrl),
// else from the environment (TASKS_TABLE, REVIEW_TABLE, TASK_QUEUE_URL);
// the endpoint from --endpoint or AWS_ENDPOINT_URL. --by defaults to $USER.
// Output is an aligned table or text; --json prints JSON. Exit status: 0 ok
// (a repeated action is a no-op, not an error), 1 error, 2 usage.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
