package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Stack output keys (template.yaml Outputs).
const (
	OutputTasksTable  = "TasksTableName"
	OutputReviewTable = "ReviewTableName"
	OutputWatchTable  = "WatchTableName"
	OutputTaskQueue   = "TaskQueueUrl"
)

// options are the global settings; every subcommand accepts them.
type options struct {
	tasksTable, reviewTable, watchTable, queueURL string
	endpoint, region, stack                       string
	json                                          bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.tasksTable, "tasks-table", "", "tasks table name (env TASKS_TABLE)")
	fs.StringVar(&o.reviewTable, "review-table", "", "review table name (env REVIEW_TABLE)")
	fs.StringVar(&o.watchTable, "watch-table", "", "watch table name, optional (env WATCH_TABLE)")
	fs.StringVar(&o.queueURL, "queue-url", "", "task queue URL, for retry (env TASK_QUEUE_URL)")
	fs.StringVar(&o.endpoint, "endpoint", "", "AWS endpoint URL, e.g. an emulator (env AWS_ENDPOINT_URL)")
	fs.StringVar(&o.region, "region", "", "AWS region (env AWS_REGION; us-east-1 with an endpoint)")
	fs.StringVar(&o.stack, "stack", "", "read table and queue names from this CloudFormation stack's outputs")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of text")
}

// stackDescriber is the CloudFormation call --stack needs.
type stackDescriber interface {
	DescribeStacks(context.Context, *cloudformation.DescribeStacksInput, ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// stackOutputs returns the outputs of a stack by key.
func stackOutputs(ctx context.Context, api stackDescriber, name string) (map[string]string, error) {
	out, err := api.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("describe stack %s: %w", name, err)
	}
	if len(out.Stacks) == 0 {
		return nil, fmt.Errorf("stack %s not found", name)
	}
	m := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		m[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return m, nil
}

// deps are what the commands use.
type deps struct {
	ledger *ledger.Ledger
	sender *dispatch.Sender // nil without a queue URL
	// budgets guards a retry of a budgeted task (opsapi.Apply): the budget
	// items live in the tasks table.
	budgets *spend.Accountant
	// notify is who a decision notifies (TASKLEDGER_NOTIFICATIONS, the
	// value the stack's functions run with; read by the decisions that
	// notify, approve and withdraw, only); nil: nobody.
	notify *followup.Config
}

// first returns the first non-empty value.
func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// errUsage marks errors that exit with status 2.
type errUsage struct{ msg string }

func (e errUsage) Error() string { return e.msg }

func usageErr(format string, a ...any) error { return errUsage{fmt.Sprintf(format, a...)} }

// connect resolves the configuration (flags, then --stack outputs, then the
// environment) and builds the clients.
func (a *app) connect(ctx context.Context, o *options, needQueue bool) (*deps, error) {
	endpoint := first(o.endpoint, a.env("AWS_ENDPOINT_URL"))
	region := first(o.region, a.env("AWS_REGION"), a.env("AWS_DEFAULT_REGION"))
	if region == "" && endpoint != "" {
		region = "us-east-1"
	}
	// Emulators accept any credentials; use dummy ones when none are set.
	static := endpoint != "" && a.env("AWS_ACCESS_KEY_ID") == "" && a.env("AWS_PROFILE") == ""
	cfg, err := awsclient.Load(ctx, awsclient.Options{Endpoint: endpoint, Region: region, StaticCredentials: static})
	if err != nil {
		return nil, err
	}
	var outs map[string]string
	if o.stack != "" {
		if outs, err = stackOutputs(ctx, a.cfn(cfg), o.stack); err != nil {
			return nil, err
		}
	}
	tasks := first(o.tasksTable, outs[OutputTasksTable], a.env("TASKS_TABLE"))
	reviews := first(o.reviewTable, outs[OutputReviewTable], a.env("REVIEW_TABLE"))
	// The watch table is written only by Ledger.Create, which no command
	// calls (approve's deliveries and notifications are follow-ups, indexed
	// by the approval's own transaction), so it is optional: given, the
	// ledger is configured as the deployed functions' is.
	watch := first(o.watchTable, outs[OutputWatchTable], a.env("WATCH_TABLE"))
	queue := first(o.queueURL, outs[OutputTaskQueue], a.env("TASK_QUEUE_URL"))
	if tasks == "" || reviews == "" {
		return nil, usageErr("the table names are not set: use --tasks-table and --review-table, TASKS_TABLE and REVIEW_TABLE, or --stack NAME")
	}
	if needQueue && queue == "" {
		return nil, usageErr("retry sends the task's message: set --queue-url, TASK_QUEUE_URL or --stack NAME")
	}
	l, err := ledger.New(awsclient.DynamoDB(cfg), ledger.Config{TasksTable: tasks, ReviewTable: reviews, WatchTable: watch})
	if err != nil {
		return nil, err
	}
	budgets, err := spend.NewAccountant(spend.AccountantConfig{DB: awsclient.DynamoDB(cfg), TasksTable: tasks})
	if err != nil {
		return nil, err
	}
	d := &deps{ledger: l, budgets: budgets}
	if queue != "" {
		d.sender = &dispatch.Sender{SQS: awsclient.SQS(cfg), QueueURL: queue}
	}
	return d, nil
}

func isUsage(err error) bool {
	var u errUsage
	return errors.As(err, &u) || errors.Is(err, flag.ErrHelp)
}
