package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var ctx = context.Background()

type bundle struct {
	env *testenv.Env
	l   *ledger.Ledger
}

func setup(t *testing.T, e *testenv.Env) *bundle {
	t.Helper()
	// As the deployed submit function creates them: each with its watch item.
	l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, WatchTable: e.Names.WatchTable})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{env: e, l: l}
}

// parked creates a task, claims it, schedules a retry and parks it.
func parked(t *testing.T, b *bundle, key string) *ledger.Task {
	t.Helper()
	task, err := b.l.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: key, Kind: "generate",
		Input: `{"prompt":"hi"}`, PayloadSHA256: "sha-" + key, MaxAttempts: 1})
	if err == nil {
		task, err = b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
	}
	if err == nil {
		task, err = b.l.ScheduleRetry(ctx, task.TaskID, task.AssignmentVersion, time.Now(), "transient", "503")
	}
	if err == nil {
		task, err = b.l.Park(ctx, task, ledger.ParkOptions{State: task.State, Version: task.AssignmentVersion}, review.BudgetExhausted(task, review.BudgetAttempts))
	}
	if err != nil {
		t.Fatal(err)
	}
	return task
}

type result struct {
	code           int
	stdout, stderr string
}

func (b *bundle) cli(env map[string]string, args ...string) result {
	var out, errb bytes.Buffer
	if env == nil {
		env = map[string]string{"USER": "alice-ops"}
	}
	code := run(args, &out, &errb, func(k string) string { return env[k] })
	return result{code, out.String(), errb.String()}
}

// flags names every resource explicitly.
func (b *bundle) flags() []string {
	n := b.env.Names
	return []string{"--endpoint", b.env.Endpoint, "--region", "us-east-1", "--tasks-table", n.TasksTable, "--review-table", n.ReviewTable, "--queue-url", n.TaskQueueURL}
}

func (b *bundle) must(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	r := b.cli(env, append(args, b.flags()...)...)
	if r.code != 0 {
		t.Fatalf("taskledger %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

func TestReviewListAndShow(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		a := parked(t, b, "a")
		parked(t, b, "b")

		r := b.must(t, nil, "review", "list")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "TASK_ID") || !strings.Contains(r.stdout, a.TaskID) || !strings.Contains(r.stdout, "budget_exhausted") {
			t.Fatalf("review list:\n%s", r.stdout)
		}
		// Columns are aligned: SUMMARY starts at the same offset in every row.
		col := strings.Index(lines[0], "SUMMARY")
		for _, l := range lines[1:] {
			if len(l) <= col || l[col] == ' ' || l[col-1] != ' ' {
				t.Fatalf("misaligned row %q (SUMMARY at %d)", l, col)
			}
		}

		r = b.must(t, nil, "review", "list", "--limit", "1")
		if !strings.Contains(r.stderr, "--cursor") {
			t.Fatalf("a partial page does not tell how to continue: %q", r.stderr)
		}
		r = b.must(t, nil, "review", "list", "--limit", "1", "--all", "--json")
		var page struct {
			Items []ledger.Review `json:"items"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Items) != 2 {
			t.Fatalf("list --all --json = %s (%v)", r.stdout, err)
		}

		r = b.must(t, nil, "review", "show", a.TaskID)
		for _, want := range []string{"reason", "budget_exhausted", "known:", "uncertain:", "safe actions:", "taskledger review retry " + a.TaskID, "needs_review"} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("review show lacks %q:\n%s", want, r.stdout)
			}
		}
		r = b.must(t, nil, "--json", "review", "show", a.TaskID)
		var detail struct {
			Review ledger.Review `json:"review"`
			Task   struct {
				State string `json:"state"`
			} `json:"task"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &detail); err != nil || detail.Review.Reason != ledger.ReviewBudgetExhausted || detail.Task.State != "needs_review" {
			t.Fatalf("show --json = %s (%v)", r.stdout, err)
		}

		r = b.must(t, nil, "task", "get", a.TaskID)
		if !strings.Contains(r.stdout, "needs_review") || !strings.Contains(r.stdout, "1 of 1") {
			t.Fatalf("task get:\n%s", r.stdout)
		}
	})
}

func TestRetryAndResolveChangeTaskAndItemTogether(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		x := parked(t, b, "x")
		y := parked(t, b, "y")

		r := b.must(t, nil, "review", "retry", x.TaskID, "--note", "provider fixed")
		if !strings.Contains(r.stdout, "re-queued") || !strings.Contains(r.stdout, "task message sent") {
			t.Fatalf("retry output:\n%s", r.stdout)
		}
		task, _ := b.l.Get(ctx, x.TaskID)
		rv, _ := b.l.GetReview(ctx, x.TaskID)
		if task.State != ledger.StateQueued || task.Attempts != 0 || rv.ReviewStatus != ledger.ReviewResolved || rv.ResolvedBy != "alice-ops" || rv.ResolutionNote != "provider fixed" {
			t.Fatalf("after retry: task %s/%d review %+v", task.State, task.Attempts, rv)
		}
		r = b.must(t, nil, "review", "retry", x.TaskID, "--note", "provider fixed")
		if !strings.Contains(r.stdout, "nothing changed") {
			t.Fatalf("repeated retry output:\n%s", r.stdout)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 || ids[0] != x.TaskID {
			t.Fatalf("queue = %v, want exactly one message", ids)
		}

		args := []string{"review", "resolve", y.TaskID, "--outcome", "completed", "--note", "provider console shows req-7 succeeded", "--by", "bob"}
		r = b.must(t, nil, args...)
		if !strings.Contains(r.stdout, "resolved as completed by bob") {
			t.Fatalf("resolve output:\n%s", r.stdout)
		}
		task, _ = b.l.Get(ctx, y.TaskID)
		rv, _ = b.l.GetReview(ctx, y.TaskID)
		if task.State != ledger.StateCompleted || !strings.Contains(task.Result, "req-7") || rv.Resolution != ledger.ResolutionCompleted || rv.ResolvedBy != "bob" {
			t.Fatalf("after resolve: task %s review %+v", task.State, rv)
		}
		r = b.must(t, nil, append(args, "--json")...)
		var res struct {
			Replayed bool `json:"replayed"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || !res.Replayed {
			t.Fatalf("repeated resolve --json = %s", r.stdout)
		}

		// A different action on a resolved item is an error (1), not a no-op.
		c := b.cli(nil, append([]string{"review", "resolve", y.TaskID, "--outcome", "failed", "--note", "n"}, b.flags()...)...)
		if c.code != 1 || !strings.Contains(c.stderr, "conflict") {
			t.Fatalf("conflicting resolve: %+v", c)
		}
		c = b.cli(nil, append([]string{"review", "show", "t_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, b.flags()...)...)
		if c.code != 1 || !strings.Contains(c.stderr, "not found") {
			t.Fatalf("show missing: %+v", c)
		}
	})
}

func TestConfigFromEnvironment(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		p := parked(t, b, "env")
		env := map[string]string{"USER": "carol", "AWS_ENDPOINT_URL": e.Endpoint, "AWS_REGION": "us-east-1",
			"TASKS_TABLE": e.Names.TasksTable, "REVIEW_TABLE": e.Names.ReviewTable, "TASK_QUEUE_URL": e.Names.TaskQueueURL}
		r := b.cli(env, "review", "retry", p.TaskID)
		if r.code != 0 {
			t.Fatalf("retry with env config: %+v", r)
		}
		if rv, _ := b.l.GetReview(ctx, p.TaskID); rv.ResolvedBy != "carol" {
			t.Fatalf("--by did not default to $USER: %+v", rv)
		}
	})
}

type fakeStacks struct {
	outputs map[string]string
	asked   string
}

func (f *fakeStacks) DescribeStacks(_ context.Context, in *cloudformation.DescribeStacksInput, _ ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	f.asked = aws.ToString(in.StackName)
	if f.outputs == nil {
		return nil, errors.New("Stack with id " + f.asked + " does not exist")
	}
	s := cfntypes.Stack{StackName: in.StackName}
	for k, v := range f.outputs {
		s.Outputs = append(s.Outputs, cfntypes.Output{OutputKey: aws.String(k), OutputValue: aws.String(v)})
	}
	return &cloudformation.DescribeStacksOutput{Stacks: []cfntypes.Stack{s}}, nil
}

func TestConfigFromStackOutputs(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		p := parked(t, b, "stack")
		fake := &fakeStacks{outputs: map[string]string{
			OutputTasksTable: e.Names.TasksTable, OutputReviewTable: e.Names.ReviewTable, OutputTaskQueue: e.Names.TaskQueueURL, "ApiUrl": "https://x"}}
		// Stale environment values lose to the stack named on the command line.
		env := map[string]string{"USER": "dan", "TASKS_TABLE": "stale", "REVIEW_TABLE": "stale", "TASK_QUEUE_URL": "stale"}
		var out, errb bytes.Buffer
		a := &app{stdout: &out, stderr: &errb, env: func(k string) string { return env[k] }, cfn: func(aws.Config) stackDescriber { return fake }}
		code := a.run(ctx, []string{"--stack", "taskledger-prod", "--endpoint", e.Endpoint, "review", "retry", p.TaskID})
		if code != 0 || fake.asked != "taskledger-prod" {
			t.Fatalf("exit %d asked %q\n%s%s", code, fake.asked, out.String(), errb.String())
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 {
			t.Fatalf("queue from stack outputs got %v", ids)
		}
		fake.outputs = nil
		if code := a.run(ctx, []string{"--stack", "nope", "--endpoint", e.Endpoint, "review", "list"}); code != 1 || !strings.Contains(errb.String(), "does not exist") {
			t.Fatalf("missing stack: exit %d %s", code, errb.String())
		}
	})
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	b := &bundle{env: &testenv.Env{Endpoint: "http://127.0.0.1:1"}}
	b.env.Names.TasksTable, b.env.Names.ReviewTable = "t", "r"
	for _, args := range [][]string{
		{},
		{"review"},
		{"review", "frobnicate"},
		{"review", "show"},
		{"review", "show", "a", "b"},
		{"review", "resolve", "t_x", "--outcome", "maybe", "--note", "n"},
		{"review", "resolve", "t_x", "--outcome", "failed"},
		{"review", "list", "--limit", "0"},
		{"review", "list", "--bogus"},
	} {
		r := b.cli(nil, append(args, "--endpoint", "http://127.0.0.1:1", "--tasks-table", "t", "--review-table", "r")...)
		if r.code != 2 || !strings.Contains(r.stderr, "taskledger:") {
			t.Errorf("taskledger %v: exit %d stderr %q, want usage error 2", args, r.code, r.stderr)
		}
	}
	// retry needs a queue, and an operator.
	if r := b.cli(nil, "review", "retry", "t_x", "--endpoint", "http://127.0.0.1:1", "--tasks-table", "t", "--review-table", "r"); r.code != 2 || !strings.Contains(r.stderr, "queue") {
		t.Errorf("retry without a queue: %+v", r)
	}
	if r := b.cli(map[string]string{}, "review", "retry", "t_x", "--queue-url", "q", "--endpoint", "http://127.0.0.1:1", "--tasks-table", "t", "--review-table", "r"); r.code != 2 || !strings.Contains(r.stderr, "--by") {
		t.Errorf("retry without $USER or --by: %+v", r)
	}
	if r := b.cli(nil, "-h"); r.code != 0 || !strings.Contains(r.stdout, "review resolve") {
		t.Errorf("-h: %+v", r)
	}
}

// TestRepeatWithParkAfterReparkDecidesNothingNew: the operator's retry was
// applied but its output lost, and the task was parked again. Repeating
// the command with the park it printed must not decide the new park: the
// retry says it was already applied, a different action is refused, and
// the task stays parked with nothing sent.
func TestRepeatWithParkAfterReparkDecidesNothingNew(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		x := parked(t, b, "repark")
		r := b.must(t, nil, "review", "retry", x.TaskID)
		if !strings.Contains(r.stdout, "decided park 1") || !strings.Contains(r.stdout, "--park 1") {
			t.Fatalf("retry output does not name the park to repeat with:\n%s", r.stdout)
		}
		c, err := b.l.Claim(ctx, x.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: time.Minute})
		if err == nil {
			_, err = b.l.Park(ctx, c, ledger.ParkOptions{State: c.State, Version: c.AssignmentVersion},
				ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "the provider may have acted"})
		}
		if err != nil {
			t.Fatal(err)
		}

		r = b.must(t, nil, "review", "retry", x.TaskID, "--park", "1")
		if !strings.Contains(r.stdout, "already applied") || !strings.Contains(r.stdout, "park 2") {
			t.Fatalf("repeated retry of park 1 output:\n%s", r.stdout)
		}
		f := b.cli(nil, append([]string{"review", "resolve", x.TaskID, "--outcome", "failed", "--note", "n", "--park", "1"}, b.flags()...)...)
		if f.code != 1 || !strings.Contains(f.stderr, "park 1") {
			t.Fatalf("failed decided on park 1 after park 2: %+v", f)
		}
		task, _ := b.l.Get(ctx, x.TaskID)
		rv, _ := b.l.GetReview(ctx, x.TaskID)
		if task.State != ledger.StateNeedsReview || rv.ReviewStatus != ledger.ReviewOpen || rv.ParkCount != 2 {
			t.Fatalf("park 2 was decided: task %s, review %s at park %d", task.State, rv.ReviewStatus, rv.ParkCount)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 {
			t.Fatalf("queue = %v, want the first retry's message alone", ids)
		}
	})
}

// words splits a command as a POSIX shell does the ones reviews suggest:
// blanks separate words, and double quotes (with backslash escapes) keep
// one word.
func words(t *testing.T, cmd string) []string {
	t.Helper()
	var out []string
	var w strings.Builder
	in, quoted, escaped := false, false, false
	for _, r := range cmd {
		switch {
		case escaped:
			w.WriteRune(r)
			escaped = false
		case quoted && r == '\\':
			escaped = true
		case r == '"':
			quoted, in = !quoted, true
		case !quoted && (r == ' ' || r == '\t'):
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quoted || escaped {
		t.Fatalf("unbalanced quoting in %q", cmd)
	}
	if in {
		out = append(out, w.String())
	}
	return out
}

// suggested returns the command of r's safe actions that starts with
// prefix ("taskledger review retry"), split into the CLI's arguments.
func suggested(t *testing.T, r *ledger.Review, prefix string) []string {
	t.Helper()
	for _, c := range testenv.ReviewCommands(r.SafeActions) {
		if strings.HasPrefix(c, prefix) {
			w := words(t, c)
			if w[0] != "taskledger" {
				t.Fatalf("%q does not run taskledger", c)
			}
			return w[1:]
		}
	}
	t.Fatalf("review of %s (park %d) suggests no %q: %q", r.TaskID, r.ParkCount, prefix, r.SafeActions)
	return nil
}

// TestSuggestedCommandsRunVerbatimAndDecideTheirPark: the commands a
// review suggests run as printed (only the deployment's flags added), and
// each decides the park it was read on. The operator runs park 1's retry;
// the task is parked again; the resolve they had copied from park 1's
// review (into a ticket) is then refused and changes nothing, and park 2's
// own resolve, run as printed, decides park 2.
func TestSuggestedCommandsRunVerbatimAndDecideTheirPark(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		x := parked(t, b, "verbatim")
		first, err := b.l.GetReview(ctx, x.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		testenv.WantReviewCommandsAt(t, first, 1)
		copied := suggested(t, first, "taskledger review resolve "+x.TaskID+" --outcome failed")

		r := b.must(t, nil, suggested(t, first, "taskledger review retry "+x.TaskID)...)
		if !strings.Contains(r.stdout, "decided park 1") || !strings.Contains(r.stdout, "re-queued") {
			t.Fatalf("park 1's suggested retry:\n%s", r.stdout)
		}
		c, err := b.l.Claim(ctx, x.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: time.Minute})
		if err == nil {
			_, err = b.l.Park(ctx, c, ledger.ParkOptions{State: c.State, Version: c.AssignmentVersion},
				review.UnknownOutcome(c, "simulated", time.Now(), "the provider offers no readback"))
		}
		if err != nil {
			t.Fatal(err)
		}

		f := b.cli(nil, append(copied, b.flags()...)...)
		if f.code != 1 || !strings.Contains(f.stderr, "park 1") {
			t.Fatalf("park 1's copied resolve, run after park 2: %+v; want it refused", f)
		}
		second, err := b.l.GetReview(ctx, x.TaskID)
		if err != nil || second.ReviewStatus != ledger.ReviewOpen || second.ParkCount != 2 {
			t.Fatalf("park 2 was decided by park 1's command: %+v (%v)", second, err)
		}
		testenv.WantReviewCommandsAt(t, second, 2)

		r = b.must(t, nil, suggested(t, second, "taskledger review resolve "+x.TaskID+" --outcome failed")...)
		if !strings.Contains(r.stdout, "decided park 2") {
			t.Fatalf("park 2's suggested resolve:\n%s", r.stdout)
		}
		task, _ := b.l.Get(ctx, x.TaskID)
		rv, _ := b.l.GetReview(ctx, x.TaskID)
		if task.State != ledger.StateFailed || rv.Resolution != ledger.ResolutionFailed || rv.ParkCount != 2 || rv.ResolutionNote != "<reason>" {
			t.Fatalf("after park 2's resolve: task %s, review %s at park %d note %q", task.State, rv.Resolution, rv.ParkCount, rv.ResolutionNote)
		}
	})
}

// TestExpiredBudgetHintDecidesTheParkTheRetryWasBoundTo: a retry refused
// because its budget record is gone suggests a resolve, and that command,
// run later, must decide the park the retry was bound to, not a newer one.
func TestExpiredBudgetHintDecidesTheParkTheRetryWasBoundTo(t *testing.T) {
	expired := fmt.Errorf("opsapi: %w", &spend.RecordExpiredError{TaskID: "t1", Key: "chain#t0", Created: time.Unix(0, 0), Retention: spend.DefaultRetention})
	got := describe(&actionError{err: expired, park: 3})
	i := strings.Index(got, "taskledger review resolve")
	if i < 0 {
		t.Fatalf("no resolve suggested: %s", got)
	}
	cmd := words(t, strings.TrimSuffix(got[i:strings.Index(got[i:], ")")+i], " --note ..."))
	if want := []string{"taskledger", "review", "resolve", "t1", "--outcome", "failed", "--park", "3"}; !slices.Equal(cmd, want) {
		t.Fatalf("suggested %q, want %q", cmd, want)
	}
	if got := describe(&actionError{err: expired}); strings.Contains(got, "--park") {
		t.Fatalf("an action bound to no park suggests one: %s", got)
	}
}
