// Command taskledger is the operator's CLI for the task ledger and its
// dead-letter review table: list and read review items, retry a parked task
// or resolve it as completed or failed, read a task, and approve, reject or
// withdraw the approval of a gated task (DESIGN §10; the same ledger
// transactions as the HTTP API, recorded as decided by "operator:<--by>").
//
//	taskledger review list [--limit N] [--cursor C] [--all]
//	taskledger review show <id>
//	taskledger review retry <id> [--park N] [--note TEXT] [--by NAME]
//	taskledger review resolve <id> --outcome completed|failed --note TEXT [--park N] [--by NAME]
//	taskledger task get <id>
//	taskledger approve <id> --artifact-sha256 HEX [--edited-result JSON] [--note TEXT] [--by NAME]
//	taskledger reject <id> [--note TEXT] [--by NAME]
//	taskledger withdraw <id> [--note TEXT] [--by NAME]
//
// It works against any endpoint. Table and queue names come from flags
// (--tasks-table, --review-table, --queue-url), else from a deployed stack's
// outputs (--stack NAME: TasksTableName, ReviewTableName, TaskQueueUrl),
// else from the environment (TASKS_TABLE, REVIEW_TABLE, TASK_QUEUE_URL);
// the endpoint from --endpoint or AWS_ENDPOINT_URL. The watch table
// (--watch-table, WatchTableName, WATCH_TABLE) is optional: only a
// submission writes it, and no command submits. --by defaults to $USER.
// --park N binds a review action to the park it was decided on (the park
// count review show prints; default: the review item's as the command
// reads it); the commands a review's safe actions suggest carry it. A repeat of an action already applied to its park changes
// nothing and says so (exit 0), as does a retry of a task with no
// approval gate parked again since (only a retry lets a park be followed
// by another); any other action given a park the task has since left is
// refused and changes nothing (exit 1). A repeat without --park decides
// the item open when it runs: after another park, the new one.
// Output is an aligned table or text; --json prints JSON. Exit status: 0 ok
// (also a repeat already applied), 1 error, 2 usage.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
