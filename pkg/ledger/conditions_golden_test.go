package ledger_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/conditions.golden from the writes the ledger makes today")

const conditionsGolden = "testdata/conditions.golden"

// TestConditionExpressionsAreUnchanged pins every write the ledger sends —
// each UpdateItem, PutItem and TransactWriteItems item: its condition,
// update expression, attribute names and value placeholders — to
// testdata/conditions.golden. The task state machine is spread over many
// methods, each building its own condition; a refactor that derives them
// from one declarative transition table must not change a single one, and
// this test is what proves that it did not. A difference fails naming the
// method and variant, with a diff of its block.
//
// It drives every exported method that writes, with each option that
// changes what is written (AfterRefusal, takeover, approval gate, result
// in S3, ...), on a real engine (a condition that does not hold shows up
// as "condition failed" and the path the method takes after it). The file
// also documents the state machine: for each write, the state the task
// moves from and to and the condition it is sent under.
//
// The expressions are built in Go, so the engine does not change them:
// the check runs on the embedded kumo emulator (half a second; moto_server
// takes some 15 s for the same calls). Recording runs every backend
// testenv selects (kumo and moto by default) and writes the file only when
// they all produced the same one. An intended change is recorded with
//
//	go test ./pkg/ledger -run TestConditionExpressionsAreUnchanged -update
//
// and the golden file's diff then shows the change for review.
func TestConditionExpressionsAreUnchanged(t *testing.T) {
	t.Parallel()
	backends := []string{"kumo"}
	var (
		mu  sync.Mutex
		got = map[string]string{}
	)
	if *updateGolden {
		backends = testenv.Backends()
		// Parallel legs: write once all have run, and only when every
		// backend that ran produced the same file.
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			var first, firstName string
			for _, b := range backends {
				out, ok := got[b]
				switch {
				case !ok:
					continue
				case first == "":
					first, firstName = out, b
				case out != first:
					t.Fatalf("nothing written: %s writes differently from %s:\n%s", b, firstName, blockDiff(first, out))
				}
			}
			if first == "" {
				t.Fatal("no backend ran: nothing to write")
			}
			if err := os.MkdirAll(filepath.Dir(conditionsGolden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(conditionsGolden, []byte(first), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := testenv.New(t, backend)
			start := time.Now()
			out := recordWrites(t, e)
			t.Logf("%s: %d scenarios in %s", backend, len(goldenScenarios), time.Since(start).Round(time.Millisecond))
			if *updateGolden {
				mu.Lock()
				got[backend] = out
				mu.Unlock()
				return
			}
			want, err := os.ReadFile(conditionsGolden)
			if err != nil {
				t.Fatalf("%v (record it with -update)", err)
			}
			if d := blockDiff(string(want), out); d != "" {
				t.Errorf("the ledger's writes differ from %s (a refactor of the transitions must not change any; "+
					"if the change is intended, record it with -update and review the diff):\n%s", conditionsGolden, d)
			}
		})
	}
}

// goldenScenario sets up a task (unrecorded), then returns the one call
// whose writes are recorded, and the id of the task it acts on.
type goldenScenario struct {
	name  string // "Method/variant"
	setup func(f *goldenFixture) (subject string, act func() error)
}

// goldenWorkers scenarios run at a time: each is isolated (its own tasks,
// clock and recorder), and the file keeps their order.
const goldenWorkers = 8

func recordWrites(t *testing.T, e *testenv.Env) string {
	blocks := make([]string, len(goldenScenarios))
	failures := make([]string, len(goldenScenarios))
	next := make(chan int)
	var wg sync.WaitGroup
	for range goldenWorkers {
		wg.Go(func() {
			for i := range next {
				blocks[i], failures[i] = runScenario(e, goldenScenarios[i])
			}
		})
	}
	for i := range goldenScenarios {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, f := range failures {
		if f != "" {
			t.Error(f)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return goldenPreamble + strings.Join(blocks, "")
}

// goldenSetupFailed is what goldenFixture.must panics with (a scenario runs
// off the test goroutine, where t.Fatal must not be called).
type goldenSetupFailed struct{ msg string }

// runScenario sets s up, records its call and renders its block; failure
// is why the scenario could not run.
func runScenario(e *testenv.Env, s goldenScenario) (block, failure string) {
	defer func() {
		if p := recover(); p != nil {
			sf, ok := p.(goldenSetupFailed)
			if !ok {
				panic(p)
			}
			failure = sf.msg
		}
	}()
	rec := &writeRecorder{DynamoDB: e.DDB, tasks: e.Names.TasksTable, reviews: e.Names.ReviewTable}
	// A fixed clock, so every value the file shows is the same each run.
	clock := testenv.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	l, err := ledger.New(rec, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, Now: clock.Now})
	if err != nil {
		return "", err.Error()
	}
	f := &goldenFixture{ctx: context.Background(), l: l, clock: clock, key: s.name}
	subject, act := s.setup(f)
	before := f.describe(subject)
	rec.start(subject)
	err = act()
	writes := rec.stop()
	after := f.describe(subject)
	var b strings.Builder
	fmt.Fprintf(&b, "\n== %s\n", s.name)
	if before.task != "" || after.task != "" {
		fmt.Fprintf(&b, "task:   %s -> %s\n", orAbsent(before.task), orAbsent(after.task))
	}
	if before.review != "" || after.review != "" {
		fmt.Fprintf(&b, "review: %s -> %s\n", orAbsent(before.review), orAbsent(after.review))
	}
	if len(writes) == 0 {
		b.WriteString("(no write)\n")
	}
	for _, w := range writes {
		b.WriteString(w)
	}
	fmt.Fprintf(&b, "result: %s\n", errName(err))
	return b.String(), ""
}

const goldenPreamble = `# The ledger's writes, one block per "Method/variant": generated by
# TestConditionExpressionsAreUnchanged (conditions_golden_test.go), which
# fails when any of them changes. Do not edit by hand; after an intended
# change run
#   go test ./pkg/ledger -run TestConditionExpressionsAreUnchanged -update
#
# Each block: the task's state (@assignment_version) and its review item
# before -> after the call, then every write the call sent, in order:
#   the operation, table, key (<task> is the task the call acts on) and
#     ReturnValues / ReturnValuesOnConditionCheckFailure, -> what the engine
#     did (applied, condition failed, cancelled);
#   condition: the ConditionExpression, split at its top-level ANDs;
#   set/remove: the UpdateExpression's clauses (sorted: their order has no
#     meaning, and some are built from a map);
#   names: ExpressionAttributeNames (#x stands for attribute x);
#   values: the ExpressionAttributeValues placeholders with their type; a
#     value is shown only when it is the same every run and says which
#     transition this is: a state, an enum (lowercase word) or a small count.
# and what the call returned.
`

func orAbsent(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var fe *ledger.FencedError
	if errors.As(err, &fe) {
		return fmt.Sprintf("%T (%s)", fe, fe.Why)
	}
	var nc *ledger.NotClaimableError
	if errors.As(err, &nc) {
		return fmt.Sprintf("%T (%s)", nc, nc.Reason)
	}
	var ce *ledger.ConflictError
	if errors.As(err, &ce) {
		return fmt.Sprintf("%T (%s)", ce, ce.State)
	}
	var de *ledger.DuplicateError
	if errors.As(err, &de) {
		return fmt.Sprintf("%T", de)
	}
	var ac *ledger.ArtifactChangedError
	if errors.As(err, &ac) {
		return fmt.Sprintf("%T", ac)
	}
	// Not the message: an AWS error's carries a request id.
	return fmt.Sprintf("error %T", err)
}

type itemState struct{ task, review string }

// describe reads the subject's task and review item (reads are not
// recorded).
func (f *goldenFixture) describe(id string) itemState {
	var s itemState
	if id == "" {
		return s
	}
	if t, err := f.l.Get(f.ctx, id); err == nil {
		s.task = fmt.Sprintf("%s@%d", t.State, t.AssignmentVersion)
	} else if !errors.Is(err, ledger.ErrNotFound) {
		f.must(fmt.Errorf("read %s: %w", id, err))
	}
	if r, err := f.l.GetReview(f.ctx, id); err == nil {
		s.review = r.ReviewStatus + " " + r.Reason
		if r.Resolution != "" {
			s.review += " (" + r.Resolution + ")"
		}
	} else if !errors.Is(err, ledger.ErrNotFound) {
		f.must(fmt.Errorf("read review %s: %w", id, err))
	}
	return s
}

// writeRecorder passes every call to the engine and, between start and
// stop, renders each write it sends.
type writeRecorder struct {
	ledger.DynamoDB
	tasks, reviews string

	mu      sync.Mutex
	on      bool
	subject string
	others  []string
	writes  []string
}

func (r *writeRecorder) start(subject string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.subject, r.others, r.writes = true, subject, nil, nil
}

func (r *writeRecorder) stop() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.writes
}

func (r *writeRecorder) recording() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.on
}

func (r *writeRecorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, s)
}

func (r *writeRecorder) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := r.DynamoDB.PutItem(ctx, in, o...)
	if !r.recording() {
		return out, err
	}
	r.add(r.render(writeOp{
		op: "PutItem", table: in.TableName, key: in.Item, item: in.Item,
		cond: in.ConditionExpression, names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues,
		onFail: string(in.ReturnValuesOnConditionCheckFailure), returns: string(in.ReturnValues),
	}, "", outcome(err)))
	return out, err
}

func (r *writeRecorder) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := r.DynamoDB.UpdateItem(ctx, in, o...)
	if !r.recording() {
		return out, err
	}
	r.add(r.render(writeOp{
		op: "UpdateItem", table: in.TableName, key: in.Key, update: in.UpdateExpression,
		cond: in.ConditionExpression, names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues,
		onFail: string(in.ReturnValuesOnConditionCheckFailure), returns: string(in.ReturnValues),
	}, "", outcome(err)))
	return out, err
}

func (r *writeRecorder) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := r.DynamoDB.TransactWriteItems(ctx, in, o...)
	if !r.recording() {
		return out, err
	}
	var b strings.Builder
	items := fmt.Sprintf("%d items", len(in.TransactItems))
	if len(in.TransactItems) == 1 {
		items = "1 item"
	}
	fmt.Fprintf(&b, "TransactWriteItems (%s) -> %s\n", items, outcome(err))
	for i, it := range in.TransactItems {
		var w writeOp
		switch {
		case it.Put != nil:
			p := it.Put
			w = writeOp{op: "Put", table: p.TableName, key: p.Item, item: p.Item, cond: p.ConditionExpression,
				names: p.ExpressionAttributeNames, values: p.ExpressionAttributeValues, onFail: string(p.ReturnValuesOnConditionCheckFailure)}
		case it.Update != nil:
			u := it.Update
			w = writeOp{op: "Update", table: u.TableName, key: u.Key, update: u.UpdateExpression, cond: u.ConditionExpression,
				names: u.ExpressionAttributeNames, values: u.ExpressionAttributeValues, onFail: string(u.ReturnValuesOnConditionCheckFailure)}
		case it.Delete != nil:
			d := it.Delete
			w = writeOp{op: "Delete", table: d.TableName, key: d.Key, cond: d.ConditionExpression,
				names: d.ExpressionAttributeNames, values: d.ExpressionAttributeValues, onFail: string(d.ReturnValuesOnConditionCheckFailure)}
		case it.ConditionCheck != nil:
			c := it.ConditionCheck
			w = writeOp{op: "ConditionCheck", table: c.TableName, key: c.Key, cond: c.ConditionExpression,
				names: c.ExpressionAttributeNames, values: c.ExpressionAttributeValues, onFail: string(c.ReturnValuesOnConditionCheckFailure)}
		}
		b.WriteString(r.render(w, fmt.Sprintf("  [%d] ", i+1), ""))
	}
	r.add(b.String())
	return out, err
}

func outcome(err error) string {
	var ccf *types.ConditionalCheckFailedException
	var tce *types.TransactionCanceledException
	switch {
	case err == nil:
		return "applied"
	case errors.As(err, &ccf):
		return "condition failed"
	case errors.As(err, &tce):
		return "cancelled"
	}
	return "error " + err.Error()
}

type writeOp struct {
	op              string
	table           *string
	key, item       map[string]types.AttributeValue
	update, cond    *string
	names           map[string]string
	values          map[string]types.AttributeValue
	returns, onFail string
}

// render writes one write as a block; prefix non-empty: an item of a
// transaction (indented, no outcome of its own).
func (r *writeRecorder) render(w writeOp, prefix, result string) string {
	var b strings.Builder
	ind := "  "
	if prefix != "" {
		ind = strings.Repeat(" ", len(prefix)+2)
	}
	b.WriteString(prefix + w.op + " " + r.tableLabel(aws.ToString(w.table)) + " " + r.keyLabel(w.key))
	var ret []string
	if w.returns != "" && w.returns != string(types.ReturnValueNone) {
		ret = append(ret, "returns "+w.returns)
	}
	if w.onFail != "" && w.onFail != string(types.ReturnValuesOnConditionCheckFailureNone) {
		ret = append(ret, "on condition failure "+w.onFail)
	}
	if len(ret) > 0 {
		b.WriteString(" (" + strings.Join(ret, ", ") + ")")
	}
	if result != "" {
		b.WriteString(" -> " + result)
	}
	b.WriteString("\n")
	if w.item != nil {
		// A put's item is the whole new record: show what says which
		// state it starts in.
		var is []string
		for _, a := range []string{"state", "review_status", "reason"} {
			if v, ok := w.item[a].(*types.AttributeValueMemberS); ok {
				is = append(is, a+"="+v.Value)
			}
		}
		fmt.Fprintf(&b, "%sitem:      %s\n", ind, strings.Join(is, " "))
	}
	if w.cond != nil {
		for i, c := range splitTop(*w.cond, " AND ") {
			if i == 0 {
				fmt.Fprintf(&b, "%scondition: %s\n", ind, c)
			} else {
				fmt.Fprintf(&b, "%s       AND %s\n", ind, c)
			}
		}
	}
	if w.update != nil {
		for _, sec := range updateSections(*w.update) {
			for i, c := range sec.clauses {
				label := ""
				if i == 0 {
					label = strings.ToLower(sec.keyword) + ":"
				}
				fmt.Fprintf(&b, "%s%-11s%s\n", ind, label, c)
			}
		}
	}
	if len(w.names) > 0 {
		var ns []string
		for p, a := range w.names {
			if p == "#"+a {
				ns = append(ns, p)
			} else {
				ns = append(ns, p+"="+a)
			}
		}
		sort.Strings(ns)
		wrapList(&b, ind, "names:", ns)
	}
	if len(w.values) > 0 {
		var vs []string
		for p, v := range w.values {
			vs = append(vs, p+showValue(p, v))
		}
		sort.Strings(vs)
		wrapList(&b, ind, "values:", vs)
	}
	return b.String()
}

func wrapList(b *strings.Builder, ind, label string, items []string) {
	line := fmt.Sprintf("%s%-11s", ind, label)
	width := len(line)
	for i, it := range items {
		if i > 0 && len(line)+1+len(it) > 100 {
			b.WriteString(line + "\n")
			line = strings.Repeat(" ", width) + it
			continue
		}
		if i > 0 {
			line += " "
		}
		line += it
	}
	b.WriteString(line + "\n")
}

var enumValue = regexp.MustCompile(`^[a-z_]{1,40}$`)

// showValue renders a value that is the same every run and tells the
// transition (a state, an enum, a flag, a small count); otherwise only its
// type, since times, ids, hashes and nonces differ.
func showValue(placeholder string, v types.AttributeValue) string {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		if placeholder != ":write_nonce" && enumValue.MatchString(x.Value) {
			return fmt.Sprintf("=%q", x.Value)
		}
		return "(S)"
	case *types.AttributeValueMemberN:
		if len(x.Value) <= 6 {
			return "=" + x.Value
		}
		return "(N)"
	case *types.AttributeValueMemberBOOL:
		return fmt.Sprintf("=%t", x.Value)
	case *types.AttributeValueMemberL:
		return "(L)"
	case *types.AttributeValueMemberM:
		return "(M)"
	case *types.AttributeValueMemberNULL:
		return "(NULL)"
	}
	return fmt.Sprintf("(%T)", v)
}

func (r *writeRecorder) tableLabel(name string) string {
	switch name {
	case r.tasks:
		return "tasks"
	case r.reviews:
		return "reviews"
	}
	return "table " + name
}

// keyLabel names a key by its role, not its id: the subject, a poison
// message, or the n-th other task in order of appearance.
func (r *writeRecorder) keyLabel(key map[string]types.AttributeValue) string {
	v, ok := key["task_id"].(*types.AttributeValueMemberS)
	if !ok {
		return "<no task_id>"
	}
	id := v.Value
	switch {
	case strings.HasPrefix(id, "msg_"):
		return "<poison message>"
	case id == r.subject:
		return "<task>"
	}
	i := slices.Index(r.others, id)
	if i < 0 {
		r.others = append(r.others, id)
		i = len(r.others) - 1
	}
	return fmt.Sprintf("<other task %d>", i+1)
}

// splitTop splits s at sep where it is outside parentheses.
func splitTop(s, sep string) []string {
	var out []string
	depth, last := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		}
		if depth == 0 && strings.HasPrefix(s[i:], sep) {
			out = append(out, s[last:i])
			last = i + len(sep)
			i += len(sep) - 1
		}
	}
	return append(out, s[last:])
}

type updateSection struct {
	keyword string
	clauses []string
}

var updateKeyword = regexp.MustCompile(`(?:^| )(SET|REMOVE|ADD|DELETE) `)

// updateSections splits an UpdateExpression into its SET/REMOVE/ADD/DELETE
// sections, each clause list sorted.
func updateSections(expr string) []updateSection {
	locs := updateKeyword.FindAllStringSubmatchIndex(expr, -1)
	if len(locs) == 0 || locs[0][0] != 0 {
		return []updateSection{{keyword: "UPDATE", clauses: []string{expr}}}
	}
	var out []updateSection
	for i, loc := range locs {
		end := len(expr)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		cs := splitTop(expr[loc[1]:end], ", ")
		sort.Strings(cs)
		out = append(out, updateSection{keyword: expr[loc[2]:loc[3]], clauses: cs})
	}
	return out
}

// blockDiff compares two renderings block by block ("== name") and
// describes each block that differs, with a line diff.
func blockDiff(want, got string) string {
	wb, wOrder := splitBlocks(want)
	gb, gOrder := splitBlocks(got)
	var b strings.Builder
	for _, name := range wOrder {
		g, ok := gb[name]
		switch {
		case !ok:
			fmt.Fprintf(&b, "--- %s: in the golden file, no longer produced\n", name)
		case g != wb[name]:
			fmt.Fprintf(&b, "--- %s: changed (- golden, + now)\n%s", name, lineDiff(wb[name], g))
		}
	}
	for _, name := range gOrder {
		if _, ok := wb[name]; !ok {
			fmt.Fprintf(&b, "--- %s: new, not in the golden file\n%s", name, lineDiff("", gb[name]))
		}
	}
	if b.Len() == 0 && !slices.Equal(wOrder, gOrder) {
		b.WriteString("the blocks are the same but in another order\n")
	}
	return b.String()
}

func splitBlocks(s string) (map[string]string, []string) {
	blocks := map[string]string{}
	name := "(preamble)"
	order := []string{name}
	for _, line := range strings.SplitAfter(s, "\n") {
		if n, ok := strings.CutPrefix(line, "== "); ok {
			name = strings.TrimSuffix(n, "\n")
			order = append(order, name)
		}
		blocks[name] += line
	}
	return blocks, order
}

// lineDiff is a small LCS line diff (blocks are a few dozen lines).
func lineDiff(a, b string) string {
	x, y := strings.Split(strings.TrimRight(a, "\n"), "\n"), strings.Split(strings.TrimRight(b, "\n"), "\n")
	if a == "" {
		x = nil
	}
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var lines []string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			lines = append(lines, "  "+x[i])
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			lines = append(lines, "+ "+y[j])
			j++
		default:
			lines = append(lines, "- "+x[i])
			i++
		}
	}
	// The block's header and three lines around each change.
	const context = 3
	keep := make([]bool, len(lines))
	for k, line := range lines {
		if k == 0 || !strings.HasPrefix(line, "  ") {
			for c := max(0, k-context); c <= min(len(lines)-1, k+context); c++ {
				keep[c] = k > 0 || c == 0
			}
		}
	}
	var out strings.Builder
	for k, line := range lines {
		switch {
		case keep[k]:
			out.WriteString(line + "\n")
		case k > 0 && keep[k-1]:
			out.WriteString("  ...\n")
		}
	}
	return out.String()
}

// goldenFixture builds the tasks the scenarios act on; key is the
// scenario's name, so each scenario has tasks of its own.
type goldenFixture struct {
	ctx   context.Context
	l     *ledger.Ledger
	clock *testenv.Clock
	key   string
}

func (f *goldenFixture) must(err error) {
	if err != nil {
		panic(goldenSetupFailed{fmt.Sprintf("%s: %v", f.key, err)})
	}
}

const goldenLease = 30 * time.Second

func (f *goldenFixture) newTask(mods ...func(*ledger.NewTask)) ledger.NewTask {
	n := ledger.NewTask{Scope: "alice", IdempotencyKey: f.key, Kind: "generate", Input: `{"prompt":"p"}`, PayloadSHA256: "sha-p"}
	for _, m := range mods {
		m(&n)
	}
	return n
}

// followUps are deliver tasks of t, one per key prefix.
func (f *goldenFixture) followUps(t *ledger.Task, prefixes ...string) []ledger.NewTask {
	var out []ledger.NewTask
	for _, p := range prefixes {
		out = append(out, ledger.NewTask{Scope: t.Scope, IdempotencyKey: p + ":" + t.TaskID + ":x", Kind: ledger.KindDeliver, ParentTaskID: t.TaskID,
			Input: `{"destination":"notify","params":{},"payload":{}}`, PayloadSHA256: "sha-" + p,
			Provenance: &ledger.Provenance{Type: ledger.ProvenanceNotification, TaskID: t.TaskID, Event: "completed"}})
		if p == "plan" {
			out[len(out)-1].Provenance = &ledger.Provenance{Type: ledger.ProvenancePlan, TaskID: t.TaskID, ArtifactSHA256: ledger.SHA256Hex(goldenResult)}
		}
	}
	return out
}

func gatedTask(n *ledger.NewTask) {
	n.ApprovalTTL = time.Hour
	n.Plan = `{"approval":{"expires_in_seconds":3600,"required":true},"deliver":[{"destination":"notify","params":{}}]}`
}

func (f *goldenFixture) queued(mods ...func(*ledger.NewTask)) *ledger.Task {
	t, err := f.l.Create(f.ctx, f.newTask(mods...))
	f.must(err)
	return t
}

func (f *goldenFixture) claim(id string, o ledger.ClaimOptions) *ledger.Task {
	if o.Owner == "" {
		o.Owner = "w"
	}
	if o.Lease == 0 {
		o.Lease = goldenLease
	}
	c, err := f.l.Claim(f.ctx, id, o)
	f.must(err)
	return c
}

// running returns the worker's claim of a fresh task.
func (f *goldenFixture) running(mods ...func(*ledger.NewTask)) *ledger.Task {
	return f.claim(f.queued(mods...).TaskID, ledger.ClaimOptions{})
}

// expired returns the claim of a task whose lease has run out (still
// running).
func (f *goldenFixture) expired(mods ...func(*ledger.NewTask)) *ledger.Task {
	c := f.running(mods...)
	f.clock.Advance(time.Minute)
	return c
}

// unknown returns the claim of a task the reconciler moved to unknown
// after its lease expired (the worker was slow, not gone).
func (f *goldenFixture) unknown(mods ...func(*ledger.NewTask)) *ledger.Task {
	c := f.expired(mods...)
	_, err := f.l.ExpireToUnknown(f.ctx, c.TaskID, c.AssignmentVersion)
	f.must(err)
	return c
}

func (f *goldenFixture) park(t *ledger.Task, from ledger.State) {
	_, err := f.l.Park(f.ctx, t, ledger.ParkOptions{State: from, Version: t.AssignmentVersion},
		ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "the outcome of the attempt is unknown"})
	f.must(err)
}

// parked returns the claim of a task parked unknown_outcome at the
// claim's version (a lapsed attempt).
func (f *goldenFixture) parked(mods ...func(*ledger.NewTask)) *ledger.Task {
	c := f.unknown(mods...)
	f.park(f.get(c.TaskID), ledger.StateUnknown)
	return c
}

// cancelledRunning returns the claim of a running task that a cancel
// while running fenced (now unknown at the claim's version + 1).
func (f *goldenFixture) cancelledRunning(mods ...func(*ledger.NewTask)) *ledger.Task {
	c := f.running(mods...)
	_, err := f.l.CancelRunning(f.ctx, c)
	f.must(err)
	return c
}

func (f *goldenFixture) get(id string) *ledger.Task {
	t, err := f.l.Get(f.ctx, id)
	f.must(err)
	return t
}

const goldenResult = `{"text":"the summary"}`

var goldenRef = &ledger.PayloadRef{Bucket: "payloads", Key: "results/t/1", SHA256: ledger.SHA256Hex(goldenResult), Size: int64(len(goldenResult))}

// awaiting returns a gated task completed by its worker (awaiting
// approval); ref: its result was placed in S3.
func (f *goldenFixture) awaiting(ref bool) *ledger.Task {
	c := f.running(gatedTask)
	comp := ledger.Completion{Result: goldenResult, ApprovalTTL: time.Hour}
	if ref {
		comp = ledger.Completion{ResultRef: goldenRef, ApprovalTTL: time.Hour}
	}
	t, err := f.l.Complete(f.ctx, c.TaskID, c.AssignmentVersion, comp)
	f.must(err)
	return t
}

func approval(t *ledger.Task, edited string, deliveries int) ledger.ApproveRequest {
	approved := t.ResultSHA256
	if edited != "" {
		approved = ledger.SHA256Hex(edited)
	}
	r := ledger.ApproveRequest{ArtifactSHA256: t.ResultSHA256, EditedResult: edited, By: "jwt:bob", Note: "ok", Policy: "test"}
	for i := range deliveries {
		r.Deliveries = append(r.Deliveries, ledger.NewTask{
			Scope: t.Scope, IdempotencyKey: ledger.DeliveryKey(t.TaskID, approved, i, t.ApprovalRound),
			Kind: ledger.KindDeliver, Input: fmt.Sprintf(`{"destination":"d%d","params":{}}`, i),
			PayloadSHA256: fmt.Sprintf("deliver-%d-%s", i, approved), ParentTaskID: t.TaskID,
		})
	}
	return r
}

func (f *goldenFixture) approved(deliveries int) *ledger.Task {
	t := f.awaiting(false)
	a, _, err := f.l.Approve(f.ctx, t, approval(t, "", deliveries))
	f.must(err)
	return a
}

var goldenLapsed = ledger.LapsedResolution{By: "worker w", Note: "the answer of attempt 1 arrived after the park"}

var goldenRevision = ledger.Review{
	Reason: ledger.ReviewResultTooLarge, Summary: "the result does not fit the item",
	Known: []string{"the provider answered"}, Uncertain: []string{}, SafeActions: []string{"completed"},
	ErrorClass: "result_too_large", ErrorMessage: "500000 bytes", ProviderRef: "ref-1",
}

func ignore[T any](_ T, err error) error { return err }

func ignore2[T, U any](_ T, _ U, err error) error { return err }

// goldenScenarios: every exported method that writes, and each variant
// that writes differently. Their names are the golden file's blocks.
var goldenScenarios = []goldenScenario{
	// create.go
	{"Create/new task", func(f *goldenFixture) (string, func() error) {
		n := f.newTask()
		return f.l.TaskID(n.Scope, n.IdempotencyKey), func() error { return ignore(f.l.Create(f.ctx, n)) }
	}},
	{"Create/same key and payload again (a replay)", func(f *goldenFixture) (string, func() error) {
		t := f.queued()
		return t.TaskID, func() error { return ignore(f.l.Create(f.ctx, f.newTask())) }
	}},
	{"Create/replacing a terminal item past its retention", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		f.must(ignore(f.l.Fail(f.ctx, c.TaskID, c.AssignmentVersion, "bad_input", "refused")))
		f.clock.Advance(ledger.DefaultRetention + time.Hour)
		return c.TaskID, func() error { return ignore(f.l.Create(f.ctx, f.newTask())) }
	}},

	// transition.go
	{"Claim/from queued", func(f *goldenFixture) (string, func() error) {
		t := f.queued()
		return t.TaskID, func() error {
			return ignore(f.l.Claim(f.ctx, t.TaskID, ledger.ClaimOptions{Owner: "w", Lease: goldenLease}))
		}
	}},
	{"Claim/from retry_wait once due", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		f.must(ignore(f.l.ScheduleRetry(f.ctx, c.TaskID, c.AssignmentVersion, f.clock.Now().Add(time.Second), "provider_5xx", "busy")))
		f.clock.Advance(2 * time.Second)
		return c.TaskID, func() error {
			return ignore(f.l.Claim(f.ctx, c.TaskID, ledger.ClaimOptions{Owner: "w", Lease: goldenLease}))
		}
	}},
	{"Claim/refused: leased", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error {
			return ignore(f.l.Claim(f.ctx, c.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: goldenLease}))
		}
	}},
	{"Claim/AllowTakeover of an expired lease", func(f *goldenFixture) (string, func() error) {
		c := f.expired()
		return c.TaskID, func() error {
			return ignore(f.l.Claim(f.ctx, c.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: goldenLease, AllowTakeover: true}))
		}
	}},
	{"Claim/AllowTakeover limited to a TakeoverKind", func(f *goldenFixture) (string, func() error) {
		c := f.expired()
		return c.TaskID, func() error {
			return ignore(f.l.Claim(f.ctx, c.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: goldenLease, AllowTakeover: true, TakeoverKind: "generate"}))
		}
	}},
	{"Renew", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error { return ignore(f.l.Renew(f.ctx, c.TaskID, c.AssignmentVersion, goldenLease)) }
	}},
	{"Renew/WithAgeDeadline", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error {
			return ignore(f.l.Renew(f.ctx, c.TaskID, c.AssignmentVersion, goldenLease, ledger.WithAgeDeadline(c.DeadlineMs)))
		}
	}},
	{"Renew/fenced: taken over", func(f *goldenFixture) (string, func() error) {
		c := f.expired()
		_ = f.claim(c.TaskID, ledger.ClaimOptions{Owner: "w2", AllowTakeover: true})
		return c.TaskID, func() error { return ignore(f.l.Renew(f.ctx, c.TaskID, c.AssignmentVersion, goldenLease)) }
	}},
	{"MarkCallStarted/lease long enough", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error { return ignore(f.l.MarkCallStarted(f.ctx, c.TaskID, c.AssignmentVersion, goldenLease)) }
	}},
	{"MarkCallStarted/lease too short: mark and renew", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		f.clock.Advance(25 * time.Second)
		return c.TaskID, func() error { return ignore(f.l.MarkCallStarted(f.ctx, c.TaskID, c.AssignmentVersion, goldenLease)) }
	}},
	{"Complete/from running", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error {
			return ignore(f.l.Complete(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult, Provider: "sim", ProviderRef: "ref-1"}))
		}
	}},
	{"Complete/from unknown at the caller's version", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		return c.TaskID, func() error {
			return ignore(f.l.Complete(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult}))
		}
	}},
	{"Complete/approval gate", func(f *goldenFixture) (string, func() error) {
		c := f.running(gatedTask)
		return c.TaskID, func() error {
			return ignore(f.l.Complete(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult, ApprovalTTL: time.Hour}))
		}
	}},
	{"Complete/approval gate the caller missed, corrected from the item", func(f *goldenFixture) (string, func() error) {
		c := f.running(gatedTask)
		return c.TaskID, func() error {
			return ignore(f.l.Complete(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult}))
		}
	}},
	{"Complete/result placed in S3 (ResultRef)", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error {
			return ignore(f.l.Complete(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{ResultRef: goldenRef}))
		}
	}},
	{"Complete/fenced: already completed", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		f.must(ignore(f.l.Complete(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult})))
		return c.TaskID, func() error {
			return ignore(f.l.Complete(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"other":1}`}))
		}
	}},
	{"Complete/WithFollowUps: a plan's delivery and a notification in one transaction", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error {
			return ignore(f.l.Complete(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult, Provider: "sim"},
				ledger.WithFollowUps(map[ledger.State][]ledger.NewTask{ledger.StateCompleted: f.followUps(c, "plan", "notify")})))
		}
	}},
	{"Complete/approval gate, WithFollowUps: the approvers' notification", func(f *goldenFixture) (string, func() error) {
		c := f.running(gatedTask)
		return c.TaskID, func() error {
			return ignore(f.l.Complete(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult, ApprovalTTL: time.Hour},
				ledger.WithFollowUps(map[ledger.State][]ledger.NewTask{ledger.StateAwaitingApproval: f.followUps(c, "notify")})))
		}
	}},
	{"CompleteFromReadback", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		return c.TaskID, func() error {
			return ignore(f.l.CompleteFromReadback(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult, Provider: "sim", ProviderRef: "ref-1"}))
		}
	}},
	{"CompleteFromReadback/approval gate", func(f *goldenFixture) (string, func() error) {
		c := f.unknown(gatedTask)
		return c.TaskID, func() error {
			return ignore(f.l.CompleteFromReadback(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult, ApprovalTTL: time.Hour}))
		}
	}},
	{"ScheduleRetry", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error {
			return ignore(f.l.ScheduleRetry(f.ctx, c.TaskID, c.AssignmentVersion, f.clock.Now().Add(time.Minute), "provider_5xx", "busy", ledger.InAttempt(c)))
		}
	}},
	{"ScheduleRetryUncertain", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error {
			return ignore(f.l.ScheduleRetryUncertain(f.ctx, c.TaskID, c.AssignmentVersion, f.clock.Now().Add(time.Minute), "reply lost", ledger.InAttempt(c)))
		}
	}},
	{"ScheduleRetry/AfterRefusal, from unknown", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		return c.TaskID, func() error {
			return ignore(f.l.ScheduleRetry(f.ctx, c.TaskID, c.AssignmentVersion, f.clock.Now().Add(time.Minute), "provider_throttled", "429", ledger.AfterRefusal(), ledger.InAttempt(c)))
		}
	}},
	{"ScheduleRetry/without AfterRefusal, fenced from unknown", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		return c.TaskID, func() error {
			return ignore(f.l.ScheduleRetry(f.ctx, c.TaskID, c.AssignmentVersion, f.clock.Now().Add(time.Minute), "provider_5xx", "busy"))
		}
	}},
	{"Fail", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error { return ignore(f.l.Fail(f.ctx, c.TaskID, c.AssignmentVersion, "bad_input", "refused")) }
	}},
	{"Fail/WithFollowUps: the requester's notification", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error {
			return ignore(f.l.Fail(f.ctx, c.TaskID, c.AssignmentVersion, "bad_input", "refused",
				ledger.WithFollowUps(map[ledger.State][]ledger.NewTask{ledger.StateFailed: f.followUps(c, "notify")})))
		}
	}},
	{"Fail/AfterRefusal, from unknown", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		return c.TaskID, func() error {
			return ignore(f.l.Fail(f.ctx, c.TaskID, c.AssignmentVersion, "bad_input", "refused", ledger.AfterRefusal()))
		}
	}},
	{"MarkUnknown", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error {
			return ignore(f.l.MarkUnknown(f.ctx, c.TaskID, c.AssignmentVersion, "unknown_outcome", "timeout after send", ledger.InAttempt(c)))
		}
	}},
	{"Release", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error { return ignore(f.l.Release(f.ctx, c.TaskID, c.AssignmentVersion)) }
	}},
	{"Release/due clamped to the age deadline", func(f *goldenFixture) (string, func() error) {
		c := f.running(func(n *ledger.NewTask) { n.MaxAge = ledger.DefaultDispatchTimeout / 2 })
		return c.TaskID, func() error { return ignore(f.l.Release(f.ctx, c.TaskID, c.AssignmentVersion)) }
	}},
	{"ReleaseUnknown", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		return c.TaskID, func() error { return ignore(f.l.ReleaseUnknown(f.ctx, c.TaskID, c.AssignmentVersion)) }
	}},
	{"ReleaseRequeued", func(f *goldenFixture) (string, func() error) {
		c := f.expired()
		f.must(ignore(f.l.Requeue(f.ctx, c.TaskID, ledger.StateRunning, c.AssignmentVersion, ledger.InAttempt(c))))
		return c.TaskID, func() error {
			return ignore(f.l.ReleaseRequeued(f.ctx, c.TaskID, c.AssignmentVersion, ledger.InAttempt(c)))
		}
	}},
	{"ReleaseClaim/by owner", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error { return ignore2(f.l.ReleaseClaim(f.ctx, c.TaskID, "w", 0)) }
	}},
	{"ReleaseClaim/by owner and version", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error { return ignore2(f.l.ReleaseClaim(f.ctx, c.TaskID, "w", c.AssignmentVersion)) }
	}},
	{"Requeue/from running, lease expired", func(f *goldenFixture) (string, func() error) {
		c := f.expired()
		return c.TaskID, func() error {
			return ignore(f.l.Requeue(f.ctx, c.TaskID, ledger.StateRunning, c.AssignmentVersion, ledger.InAttempt(c)))
		}
	}},
	{"Requeue/from unknown (readback found nothing)", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		return c.TaskID, func() error { return ignore(f.l.Requeue(f.ctx, c.TaskID, ledger.StateUnknown, c.AssignmentVersion)) }
	}},
	{"RequeueCallMayRun", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		return c.TaskID, func() error {
			return ignore(f.l.RequeueCallMayRun(f.ctx, c))
		}
	}},
	{"RequeueUnstarted", func(f *goldenFixture) (string, func() error) {
		c := f.expired()
		return c.TaskID, func() error { return ignore(f.l.RequeueUnstarted(f.ctx, c.TaskID, c.AssignmentVersion)) }
	}},
	{"ClaimDispatch/first re-send", func(f *goldenFixture) (string, func() error) {
		t := f.queued()
		return t.TaskID, func() error { return ignore2(f.l.ClaimDispatch(f.ctx, t)) }
	}},
	{"ClaimDispatch/later re-send", func(f *goldenFixture) (string, func() error) {
		t := f.queued()
		f.must(ignore2(f.l.ClaimDispatch(f.ctx, t)))
		t = f.get(t.TaskID)
		return t.TaskID, func() error { return ignore2(f.l.ClaimDispatch(f.ctx, t)) }
	}},
	{"Cancel/queued", func(f *goldenFixture) (string, func() error) {
		t := f.queued()
		return t.TaskID, func() error { return ignore(f.l.Cancel(f.ctx, t.TaskID)) }
	}},
	{"Cancel/already cancelled", func(f *goldenFixture) (string, func() error) {
		t := f.queued()
		f.must(ignore(f.l.Cancel(f.ctx, t.TaskID)))
		return t.TaskID, func() error { return ignore(f.l.Cancel(f.ctx, t.TaskID)) }
	}},
	{"ExpireToUnknown", func(f *goldenFixture) (string, func() error) {
		c := f.expired()
		return c.TaskID, func() error {
			return ignore(f.l.ExpireToUnknown(f.ctx, c.TaskID, c.AssignmentVersion, ledger.InAttempt(c)))
		}
	}},
	{"RequeueRetrySafe", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		return c.TaskID, func() error { return ignore(f.l.RequeueRetrySafe(f.ctx, c.TaskID, c.AssignmentVersion)) }
	}},
	{"AwaitReadback", func(f *goldenFixture) (string, func() error) {
		c := f.queued()
		return c.TaskID, func() error {
			return ignore(f.l.AwaitReadback(f.ctx, c.TaskID, c.AssignmentVersion, f.clock.Now().Add(-time.Minute)))
		}
	}},
	{"DeferReadback", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		u := f.get(c.TaskID)
		return c.TaskID, func() error {
			return ignore(f.l.DeferReadback(f.ctx, c.TaskID, u.AssignmentVersion, u.UnknownSince(), f.clock.Now()))
		}
	}},

	// admission.go
	{"WaitAdmission", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error {
			return ignore(f.l.WaitAdmission(f.ctx, c.TaskID, c.AssignmentVersion, f.clock.Now().Add(30*time.Second)))
		}
	}},

	// cancel.go
	{"CancelRunning/from running", func(f *goldenFixture) (string, func() error) {
		c := f.running()
		return c.TaskID, func() error { return ignore(f.l.CancelRunning(f.ctx, c)) }
	}},
	{"CancelRunning/from unknown", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		u := f.get(c.TaskID)
		return c.TaskID, func() error { return ignore(f.l.CancelRunning(f.ctx, u)) }
	}},
	{"CancelUnknown", func(f *goldenFixture) (string, func() error) {
		c := f.cancelledRunning()
		return c.TaskID, func() error {
			return ignore(f.l.CancelUnknown(f.ctx, c.TaskID, f.get(c.TaskID).AssignmentVersion, "no provider call was made"))
		}
	}},
	{"CompleteCancelled", func(f *goldenFixture) (string, func() error) {
		c := f.cancelledRunning()
		return c.TaskID, func() error {
			return ignore(f.l.CompleteCancelled(f.ctx, c.TaskID, f.get(c.TaskID).AssignmentVersion, ledger.Completion{Result: goldenResult}))
		}
	}},

	{"CompleteCancelled/approval gate", func(f *goldenFixture) (string, func() error) {
		c := f.cancelledRunning(gatedTask)
		return c.TaskID, func() error {
			return ignore(f.l.CompleteCancelled(f.ctx, c.TaskID, f.get(c.TaskID).AssignmentVersion, ledger.Completion{Result: goldenResult, ApprovalTTL: time.Hour}))
		}
	}},

	// lapsed.go
	{"CompleteLapsed", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		return c.TaskID, func() error {
			return ignore(f.l.CompleteLapsed(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult, Provider: "sim", ProviderRef: "ref-1"}, goldenLapsed))
		}
	}},
	{"CompleteLapsed/approval gate", func(f *goldenFixture) (string, func() error) {
		c := f.parked(gatedTask)
		return c.TaskID, func() error {
			return ignore(f.l.CompleteLapsed(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult, ApprovalTTL: time.Hour}, goldenLapsed))
		}
	}},
	{"FailLapsed", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		return c.TaskID, func() error {
			return ignore(f.l.FailLapsed(f.ctx, c.TaskID, c.AssignmentVersion, "bad_input", "refused", goldenLapsed))
		}
	}},
	{"RetryLapsed", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		return c.TaskID, func() error {
			return ignore(f.l.RetryLapsed(f.ctx, c.TaskID, c.AssignmentVersion, f.clock.Now().Add(time.Minute), "provider_5xx", "busy", goldenLapsed, ledger.InAttempt(c)))
		}
	}},
	{"ReleaseLapsed", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		return c.TaskID, func() error { return ignore(f.l.ReleaseLapsed(f.ctx, c.TaskID, c.AssignmentVersion, goldenLapsed)) }
	}},
	{"CancelLapsed", func(f *goldenFixture) (string, func() error) {
		c := f.cancelledRunning()
		f.park(f.get(c.TaskID), ledger.StateUnknown)
		return c.TaskID, func() error {
			return ignore(f.l.CancelLapsed(f.ctx, c.TaskID, f.get(c.TaskID).AssignmentVersion, "the call was refused", goldenLapsed))
		}
	}},
	{"ReviseLapsed", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		return c.TaskID, func() error { return ignore(f.l.ReviseLapsed(f.ctx, c.TaskID, c.AssignmentVersion, goldenRevision)) }
	}},
	{"ReviseLapsedReview", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		return c.TaskID, func() error { return f.l.ReviseLapsedReview(f.ctx, c.TaskID, 1, goldenRevision) }
	}},
	{"CompleteLapsed/fenced: an operator acted first", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		f.must(ignore3(f.l.Act(f.ctx, c.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops"})))
		return c.TaskID, func() error {
			return ignore(f.l.CompleteLapsed(f.ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: goldenResult}, goldenLapsed))
		}
	}},

	// review.go
	{"Park/from unknown", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		u := f.get(c.TaskID)
		return c.TaskID, func() error {
			return ignore(f.l.Park(f.ctx, u, ledger.ParkOptions{State: ledger.StateUnknown, Version: u.AssignmentVersion},
				ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "no readback"}))
		}
	}},
	{"Park/FollowUps: the requester's notification", func(f *goldenFixture) (string, func() error) {
		c := f.unknown()
		u := f.get(c.TaskID)
		return c.TaskID, func() error {
			return ignore(f.l.Park(f.ctx, u, ledger.ParkOptions{State: ledger.StateUnknown, Version: u.AssignmentVersion, FollowUps: f.followUps(u, "notify")},
				ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "no readback"}))
		}
	}},
	{"Park/LeaseExpired, from running", func(f *goldenFixture) (string, func() error) {
		c := f.expired()
		return c.TaskID, func() error {
			return ignore(f.l.Park(f.ctx, c, ledger.ParkOptions{State: ledger.StateRunning, Version: c.AssignmentVersion, LeaseExpired: true},
				ledger.Review{Reason: ledger.ReviewStaleLease, Summary: "the lease expired"}))
		}
	}},
	{"Park/again after an operator retry (review item resolved)", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		f.must(ignore3(f.l.Act(f.ctx, c.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops"})))
		q := f.get(c.TaskID)
		return c.TaskID, func() error {
			return ignore(f.l.Park(f.ctx, q, ledger.ParkOptions{State: ledger.StateQueued, Version: q.AssignmentVersion},
				ledger.Review{Reason: ledger.ReviewBudgetExhausted, Summary: "out of budget"}))
		}
	}},
	{"PutPoison", func(f *goldenFixture) (string, func() error) {
		r := ledger.Review{MessageID: "m-" + f.key, Summary: "not a task reference", BodySHA256: "abc", BodyBytes: 3}
		return ledger.PoisonID(r.MessageID), func() error { return ignore(f.l.PutPoison(f.ctx, r)) }
	}},
	{"PutPoison/again", func(f *goldenFixture) (string, func() error) {
		r := ledger.Review{MessageID: "m-" + f.key, Summary: "not a task reference", BodySHA256: "abc", BodyBytes: 3}
		f.must(ignore(f.l.PutPoison(f.ctx, r)))
		return ledger.PoisonID(r.MessageID), func() error { return ignore(f.l.PutPoison(f.ctx, r)) }
	}},

	// approval.go
	{"Approve/no deliveries", func(f *goldenFixture) (string, func() error) {
		t := f.awaiting(false)
		return t.TaskID, func() error { return ignore2(f.l.Approve(f.ctx, t, approval(t, "", 0))) }
	}},
	{"Approve/with two deliveries", func(f *goldenFixture) (string, func() error) {
		t := f.awaiting(false)
		return t.TaskID, func() error { return ignore2(f.l.Approve(f.ctx, t, approval(t, "", 2))) }
	}},
	{"Approve/edited result", func(f *goldenFixture) (string, func() error) {
		t := f.awaiting(false)
		return t.TaskID, func() error { return ignore2(f.l.Approve(f.ctx, t, approval(t, `{"text":"edited"}`, 1))) }
	}},
	{"Approve/edited result, the generated one in S3", func(f *goldenFixture) (string, func() error) {
		t := f.awaiting(true)
		return t.TaskID, func() error { return ignore2(f.l.Approve(f.ctx, t, approval(t, `{"text":"edited"}`, 0))) }
	}},
	{"Approve/after a withdrawal (next round)", func(f *goldenFixture) (string, func() error) {
		a := f.approved(1)
		w, err := f.l.Withdraw(f.ctx, a.TaskID, "jwt:bob", "changed my mind", "test")
		f.must(err)
		return w.TaskID, func() error { return ignore2(f.l.Approve(f.ctx, w, approval(w, "", 1))) }
	}},
	{"Approve/edited again after a withdrawal (the generated result is kept once)", func(f *goldenFixture) (string, func() error) {
		t := f.awaiting(false)
		_, _, err := f.l.Approve(f.ctx, t, approval(t, `{"text":"edited"}`, 0))
		f.must(err)
		w, err := f.l.Withdraw(f.ctx, t.TaskID, "jwt:bob", "not quite", "test")
		f.must(err)
		return w.TaskID, func() error { return ignore2(f.l.Approve(f.ctx, w, approval(w, `{"text":"edited twice"}`, 0))) }
	}},
	{"Approve/refused: artifact changed", func(f *goldenFixture) (string, func() error) {
		t := f.awaiting(false)
		stale := *t
		stale.ResultSHA256 = ledger.SHA256Hex("an older result")
		return t.TaskID, func() error { return ignore2(f.l.Approve(f.ctx, &stale, approval(&stale, "", 0))) }
	}},
	{"Reject", func(f *goldenFixture) (string, func() error) {
		t := f.awaiting(false)
		return t.TaskID, func() error { return ignore2(f.l.Reject(f.ctx, t, "jwt:bob", "no", "test")) }
	}},
	{"Withdraw/with a delivery", func(f *goldenFixture) (string, func() error) {
		a := f.approved(1)
		return a.TaskID, func() error { return ignore(f.l.Withdraw(f.ctx, a.TaskID, "jwt:bob", "changed my mind", "test")) }
	}},
	{"Withdraw/without deliveries", func(f *goldenFixture) (string, func() error) {
		a := f.approved(0)
		return a.TaskID, func() error { return ignore(f.l.Withdraw(f.ctx, a.TaskID, "jwt:bob", "", "")) }
	}},
	{"Withdraw/a later round", func(f *goldenFixture) (string, func() error) {
		a := f.approved(1)
		w, err := f.l.Withdraw(f.ctx, a.TaskID, "jwt:bob", "changed my mind", "test")
		f.must(err)
		_, _, err = f.l.Approve(f.ctx, w, approval(w, "", 1))
		f.must(err)
		return a.TaskID, func() error { return ignore(f.l.Withdraw(f.ctx, a.TaskID, "jwt:bob", "again", "test")) }
	}},
	{"ExpireApproval", func(f *goldenFixture) (string, func() error) {
		t := f.awaiting(false)
		f.clock.Advance(2 * time.Hour)
		return t.TaskID, func() error {
			return ignore(f.l.ExpireApproval(f.ctx, t, ledger.Review{Summary: "nobody decided in time"}))
		}
	}},

	// operator.go
	{"Act/retry", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		return c.TaskID, func() error {
			return ignore3(f.l.Act(f.ctx, c.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops"}))
		}
	}},
	{"Act/completed", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		return c.TaskID, func() error {
			return ignore3(f.l.Act(f.ctx, c.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionCompleted, By: "ops", Note: "the provider shows it done"}))
		}
	}},
	{"Act/failed", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		return c.TaskID, func() error {
			return ignore3(f.l.Act(f.ctx, c.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops", Note: "give up"}))
		}
	}},
	{"Act/poison message resolved", func(f *goldenFixture) (string, func() error) {
		r := ledger.Review{MessageID: "m-" + f.key, Summary: "not a task reference", BodySHA256: "abc", BodyBytes: 3}
		f.must(ignore(f.l.PutPoison(f.ctx, r)))
		id := ledger.PoisonID(r.MessageID)
		return id, func() error {
			return ignore3(f.l.Act(f.ctx, id, ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops", Note: "garbage"}))
		}
	}},
	{"Act/same action again (a replay)", func(f *goldenFixture) (string, func() error) {
		c := f.parked()
		a := ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops", Note: "give up"}
		f.must(ignore3(f.l.Act(f.ctx, c.TaskID, a)))
		return c.TaskID, func() error { return ignore3(f.l.Act(f.ctx, c.TaskID, a)) }
	}},
}

func ignore3[T, U, V any](_ T, _ U, _ V, err error) error { return err }
