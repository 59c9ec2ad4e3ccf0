package lambdaenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Base is built from the environment every function has.
type Base struct {
	TasksTable, ReviewTable, WatchTable, TaskQueueURL string
	AWS                                               aws.Config
	Ledger                                            *ledger.Ledger
}

// Load reads TASKS_TABLE, REVIEW_TABLE, WATCH_TABLE and TASK_QUEUE_URL
// (all required), loads the AWS configuration and builds the ledger. getenv
// is os.Getenv in the mains. Globals give every function WATCH_TABLE: the
// submit function's ledger puts a watch item per task it creates
// (Ledger.Create), the reconciler reads them.
func Load(ctx context.Context, getenv func(string) string) (*Base, error) {
	// A loop over literal names, so internal/templatetest can see which
	// variables the functions read.
	env := map[string]string{}
	for _, k := range []string{"TASKS_TABLE", "REVIEW_TABLE", "WATCH_TABLE", "TASK_QUEUE_URL"} {
		v := getenv(k)
		if v == "" {
			return nil, Missing(k)
		}
		env[k] = v
	}
	b := &Base{TasksTable: env["TASKS_TABLE"], ReviewTable: env["REVIEW_TABLE"], WatchTable: env["WATCH_TABLE"], TaskQueueURL: env["TASK_QUEUE_URL"]}
	cfg, err := awsclient.Load(ctx, awsclient.Options{})
	if err != nil {
		return nil, err
	}
	b.AWS = cfg
	b.Ledger, err = ledger.New(awsclient.DynamoDB(cfg), ledger.Config{TasksTable: b.TasksTable, ReviewTable: b.ReviewTable, WatchTable: b.WatchTable})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Missing is the error for a required variable that is not set.
func Missing(name string) error {
	return fmt.Errorf("environment variable %s is required (set by template.yaml)", name)
}

// Exit reports an init failure of the named function on the JSON log and
// on stderr, and exits 1: the Lambda runtime then reports an init error.
func Exit(log *slog.Logger, function string, err error) {
	log.Error(function+": init failed", "error", err.Error())
	fmt.Fprintln(os.Stderr, function+":", err)
	os.Exit(1)
}
