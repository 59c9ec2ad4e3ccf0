package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

const usage = `usage: taskledger [flags] <command> [args] [flags]

commands:
  review list [--limit N] [--cursor C] [--all]   open review items, oldest first
  review show <id>                               one review item and its task
  review retry <id> [--park N] [--note TEXT] [--by NAME]
                                                 re-queue the task (same id, fresh budget) and send it
  review resolve <id> --outcome completed|failed --note TEXT [--park N] [--by NAME]
  task get <id>                                  one task
  approve <id> --artifact-sha256 HEX [--edited-result JSON] [--note TEXT] [--by NAME]
                                                 approve a task awaiting approval; creates its deliveries
                                                 and the requester's notification
  reject <id> [--note TEXT] [--by NAME]          reject it (terminal, nothing delivered)
  withdraw <id> [--note TEXT] [--by NAME]        withdraw an approval whose deliveries have not started;
                                                 notifies the approvers again

flags (anywhere):
  --tasks-table, --review-table, --queue-url     names (else --stack outputs, else env
                                                 TASKS_TABLE, REVIEW_TABLE, TASK_QUEUE_URL)
  --watch-table                                  optional (no command writes it; env WATCH_TABLE)
  --stack NAME                                   read them from a deployed stack's outputs
  --endpoint URL, --region R                     (env AWS_ENDPOINT_URL, AWS_REGION)
  env TASKLEDGER_NOTIFICATIONS                   who approve and withdraw notify: the value the
                                                 stack's functions run with (unset: nobody)
  --json                                         JSON output

--park N names the park an action decides: the park count review show
prints (default: the review item's as the command reads it); the commands
a review's safe actions suggest carry their park's. Repeat a command whose
outcome you did not see with the same --park N:
  - applied to park N already: nothing changes, it prints "already applied"
    (exit 0); a retry also after the task was parked again since, if it has
    no approval gate (only a retry lets a park be followed by another);
  - the task parked again since (any other case): refused, nothing changes
    (exit 1); read the new review (review show) and decide it.
Without --park a repeat decides the review item open when it runs: after
the task was parked again, that is the new park.
exit status: 0 ok (also a repeat already applied), 1 error, 2 usage
`

// app carries the process environment and the replaceable clients.
type app struct {
	stdout, stderr io.Writer
	env            func(string) string
	cfn            func(aws.Config) stackDescriber
}

// run is the whole CLI; main only wires the process into it.
func run(args []string, stdout, stderr io.Writer, env func(string) string) int {
	a := &app{stdout: stdout, stderr: stderr, env: env,
		cfn: func(c aws.Config) stackDescriber { return cloudformation.NewFromConfig(c) }}
	return a.run(context.Background(), args)
}

func (a *app) run(ctx context.Context, args []string) int {
	err := a.dispatch(ctx, args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(a.stdout, usage)
		return 0
	case isUsage(err):
		fmt.Fprintf(a.stderr, "taskledger: %v\n(taskledger -h for usage)\n", err)
		return 2
	default:
		fmt.Fprintf(a.stderr, "taskledger: %v\n", describe(err))
		return 1
	}
}

// command is one parsed invocation.
type command struct {
	opts    options
	pos     []string
	limit   int
	cursor  string
	all     bool
	note    string
	by      string
	outcome string
	sha     string
	edited  string
	park    int
}

func (a *app) dispatch(ctx context.Context, args []string) error {
	c := &command{}
	fs := flag.NewFlagSet("taskledger", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.opts.register(fs)
	fs.IntVar(&c.limit, "limit", 50, "items per page (1-100)")
	fs.StringVar(&c.cursor, "cursor", "", "page cursor from a previous list")
	fs.BoolVar(&c.all, "all", false, "list every page")
	fs.StringVar(&c.note, "note", "", "operator note (evidence or reason)")
	fs.StringVar(&c.by, "by", a.env("USER"), "operator name for the audit trail (default $USER)")
	fs.StringVar(&c.outcome, "outcome", "", "completed or failed (resolve)")
	fs.StringVar(&c.sha, "artifact-sha256", "", "the result_sha256 approved (approve)")
	fs.StringVar(&c.edited, "edited-result", "", "the result as edited, one JSON object (approve)")
	fs.IntVar(&c.park, "park", 0, "the park the action decides: its park count (review retry, resolve)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErr("%v", err)
	}
	c.pos = pos
	if len(pos) > 0 && (pos[0] == "approve" || pos[0] == "reject" || pos[0] == "withdraw") {
		return a.decide(ctx, c)
	}
	if len(pos) < 2 {
		if len(pos) == 1 && pos[0] == "help" {
			return flag.ErrHelp
		}
		return usageErr("missing command")
	}
	switch pos[0] + " " + pos[1] {
	case "review list":
		return a.reviewList(ctx, c)
	case "review show":
		return a.withID(ctx, c, false, a.reviewShow)
	case "review retry":
		return a.withID(ctx, c, true, a.reviewRetry)
	case "review resolve":
		return a.withID(ctx, c, false, a.reviewResolve)
	case "task get":
		return a.withID(ctx, c, false, a.taskGet)
	}
	return usageErr("unknown command %q", pos[0]+" "+pos[1])
}

// parseInterleaved parses flags that may come before, between or after
// the positional arguments, and returns the positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func (a *app) withID(ctx context.Context, c *command, needQueue bool, f func(context.Context, *command, *deps, string) error) error {
	if len(c.pos) != 3 {
		return usageErr("%s needs exactly one id", c.pos[0]+" "+c.pos[1])
	}
	if err := c.validate(); err != nil {
		return err
	}
	d, err := a.connect(ctx, &c.opts, needQueue)
	if err != nil {
		return err
	}
	return f(ctx, c, d, c.pos[2])
}

func (c *command) validate() error {
	if c.park < 0 {
		return usageErr("--park must be a park count (review show prints it)")
	}
	switch c.pos[0] + " " + c.pos[1] {
	case "review retry":
		if strings.TrimSpace(c.by) == "" {
			return usageErr("--by is required (no $USER to default to)")
		}
	case "review resolve":
		if c.outcome != ledger.ResolutionCompleted && c.outcome != ledger.ResolutionFailed {
			return usageErr("--outcome must be completed or failed (use review retry to re-queue)")
		}
		if strings.TrimSpace(c.note) == "" {
			return usageErr("--note is required: the evidence (completed) or the reason (failed)")
		}
		if strings.TrimSpace(c.by) == "" {
			return usageErr("--by is required (no $USER to default to)")
		}
	}
	return nil
}

func (a *app) reviewList(ctx context.Context, c *command) error {
	if len(c.pos) != 2 {
		return usageErr("review list takes no arguments")
	}
	if c.limit < 1 || c.limit > 100 {
		return usageErr("--limit must be from 1 to 100")
	}
	d, err := a.connect(ctx, &c.opts, false)
	if err != nil {
		return err
	}
	page := opsapi.ReviewPage{Items: []ledger.Review{}}
	cursor := c.cursor
	for {
		items, next, err := tasklist.ListOpenReviews(ctx, d.ledger, int32(c.limit), cursor)
		if err != nil {
			return err
		}
		page.Items = append(page.Items, items...)
		page.NextCursor = next
		if !c.all || next == "" {
			break
		}
		cursor = next
	}
	if c.opts.json {
		return writeJSON(a.stdout, page)
	}
	printReviews(a.stdout, page.Items)
	if page.NextCursor != "" {
		fmt.Fprintf(a.stderr, "more items: taskledger review list --cursor %s (or --all)\n", page.NextCursor)
	}
	return nil
}

func (a *app) reviewShow(ctx context.Context, c *command, d *deps, id string) error {
	detail, err := opsapi.Show(ctx, d.ledger, id)
	if err != nil {
		return err
	}
	if c.opts.json {
		return writeJSON(a.stdout, detail)
	}
	printReview(a.stdout, detail.Review)
	if detail.Task != nil {
		fmt.Fprintln(a.stdout)
		printTask(a.stdout, detail.Task)
	}
	return nil
}

func (a *app) reviewRetry(ctx context.Context, c *command, d *deps, id string) error {
	return a.act(ctx, c, d, id, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, Note: c.note, By: c.by, ParkCount: c.park})
}

func (a *app) reviewResolve(ctx context.Context, c *command, d *deps, id string) error {
	return a.act(ctx, c, d, id, ledger.OperatorAction{Resolution: c.outcome, Note: c.note, By: c.by, ParkCount: c.park})
}

// act applies act bound to the park it decides: --park, else the review
// item's as read here, so the output can name it for a repeat.
func (a *app) act(ctx context.Context, c *command, d *deps, id string, act ledger.OperatorAction) error {
	if act.ParkCount == 0 {
		rv, err := d.ledger.GetReview(ctx, id)
		if err != nil {
			return err
		}
		act.ParkCount = rv.ParkCount
	}
	res, err := opsapi.Apply(ctx, d.ledger, d.sender, d.budgets, id, act)
	if err != nil {
		return &actionError{err: err, park: act.ParkCount}
	}
	if res.SpendErr != nil {
		fmt.Fprintf(a.stderr, "warning: the action was applied, but settling the parked run's reservations failed (they stay counted on its budget and daily quota): %v\n", res.SpendErr)
	}
	if c.opts.json {
		return writeJSON(a.stdout, res)
	}
	printAction(a.stdout, a.stderr, id, act, res)
	return nil
}

func (a *app) taskGet(ctx context.Context, c *command, d *deps, id string) error {
	t, err := d.ledger.Get(ctx, id)
	if err != nil {
		return err
	}
	view := struct {
		*opsapi.Task
		Review *ledger.Review `json:"review,omitempty"`
	}{Task: opsapi.ViewTask(t)}
	if t.State == ledger.StateNeedsReview {
		if rv, err := d.ledger.GetReview(ctx, id); err == nil {
			view.Review = rv
		}
	}
	if c.opts.json {
		return writeJSON(a.stdout, view)
	}
	printTask(a.stdout, view.Task)
	if view.Review != nil {
		fmt.Fprintf(a.stdout, "\nreview item (taskledger review show %s):\n  %s\n", id, view.Review.Summary)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// actionError is a review action's error and the park the action was
// bound to, which a suggested next command names.
type actionError struct {
	err  error
	park int
}

func (e *actionError) Error() string { return e.err.Error() }
func (e *actionError) Unwrap() error { return e.err }

// describe turns ledger errors into an operator's sentence.
func describe(err error) string {
	var ce *ledger.ConflictError
	var te *ledger.ThrottledError
	var re *spend.RecordExpiredError
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return "not found: " + err.Error()
	case errors.As(err, &re):
		// The suggested command decides the park this one did, as every
		// suggested review command does, not whatever is parked when it runs.
		park := ""
		if ae := (*actionError)(nil); errors.As(err, &ae) && ae.park > 0 {
			park = fmt.Sprintf(" --park %d", ae.park)
		}
		return fmt.Sprintf("not retried, nothing changed: task %s was created %s and its budget record %s is gone (kept %s after the last reservation), so a retry would start its budget from nothing spent; resolve the review instead (taskledger review resolve %s --outcome failed%s --note ...), or submit the work as a new task",
			re.TaskID, re.Created.Format(time.RFC3339), re.Key, re.Retention, re.TaskID, park)
	case errors.As(err, &ce):
		return "conflict: " + ce.Error()
	case errors.As(err, &te):
		return "throttled by DynamoDB; nothing was changed; try again"
	}
	return err.Error()
}
