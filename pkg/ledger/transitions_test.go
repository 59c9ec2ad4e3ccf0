package ledger_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestEveryTransitionFromEveryState drives each row of the transition
// table from each of the ten states, on a real engine: the item is put in
// that state, built to satisfy the row's other guards, and the row's
// method is called. From a from-state it must succeed, leave the row's
// to-state and change attempts and assignment_version as the row says;
// from any other state it must be refused with the row's refusal and
// leave the task item (and its review item) byte for byte as they were —
// except a repeat, which succeeds and writes nothing. In every cell the
// row's Go predicate (Allows) must give the engine's answer: the
// condition DynamoDB evaluated and the predicate that restates it come
// from the same guards, and this is where they are seen to agree.
//
// Rows no caller makes on their own are left to their own tests: the
// review item alone (PutPoison, ReviseLapsedReview), a delivery's
// creation inside Approve or a follow-up's inside a settling write (the
// "_follow_ups" rows check that their follow-up exists exactly when the
// write applied), and clamp_due, a second write of Release and
// the other writes to queued.
func TestEveryTransitionFromEveryState(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		start := time.Now()
		m := &matrix{env: e, clock: testenv.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))}
		var err error
		m.l, err = ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, Now: m.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		var cells []*cell
		for _, tr := range ledger.Transitions() {
			if slices.Contains([]string{"put_poison", "revise_lapsed_review", "approve_delivery", "follow_up", "clamp_due"}, tr.Op) {
				continue
			}
			if driveRow[tr.Op] == nil {
				t.Errorf("row %s has no driver in this test", tr.Op)
				continue
			}
			for _, s := range allStates {
				if tr.Op == "claim" && s == ledger.StateRetryWait {
					continue // Claim's second write there: row claim_retry's cell
				}
				cells = append(cells, m.newCell(t, tr, s))
			}
		}
		// The items of all cells are put and read in batches, and the
		// calls run from a pool of goroutines: most of a cell's time is
		// the engine's, and t.Parallel would hold the cells to -parallel
		// (GOMAXPROCS). Each cell's verdict is then its own subtest. The
		// rows that write in a transaction go first, while the table is
		// small: moto copies its tables for each TransactWriteItems.
		var tx, rest []*cell
		for _, c := range cells {
			if c.tr.Review != ledger.ReviewNone || c.tr.Method == "Approve" || strings.HasPrefix(c.tr.Method, "Withdraw") || c.followUp() != "" {
				tx = append(tx, c)
			} else {
				rest = append(rest, c)
			}
		}
		m.drive(t, tx)
		m.drive(t, rest)
		for _, c := range cells {
			t.Run(c.tr.Op+"/from_"+string(c.item.State), c.check)
		}
		t.Logf("%s: %d cells in %s, %d calls", e.Backend, len(cells), time.Since(start).Round(time.Millisecond), calls(e))
	})
}

// drive puts the cells' items, reads them, calls each cell's method and
// reads the items again.
func (m *matrix) drive(t *testing.T, cells []*cell) {
	m.putAll(t, cells)
	m.readAll(t, cells, func(c *cell) *items { return &c.before })
	sem := make(chan struct{}, matrixWorkers)
	var wg sync.WaitGroup
	for _, c := range cells {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c.err = driveRow[c.tr.Op](c)
		})
	}
	wg.Wait()
	m.readAll(t, cells, func(c *cell) *items { return &c.after })
}

func calls(e *testenv.Env) int {
	n := 0
	for _, c := range e.Counter.Calls() {
		n += c
	}
	return n
}

const (
	matrixWorkers = 16
	matrixVersion = 3 // the caller's assignment version in every cell
	matrixLease   = 30 * time.Second
	matrixOwner   = "w-owner"
	matrixResult  = `{"text":"the summary"}`
)

var errNotApplied = errors.New("not applied (ok=false)")

type matrix struct {
	env   *testenv.Env
	l     *ledger.Ledger
	clock *testenv.Clock
}

// items are the stored items of a cell by table and task_id (absent: no
// entry).
type items map[string]map[string]map[string]types.AttributeValue

// cell is one (row, state): the items as put, what the caller read, the
// ids it involves, what the call returned and the items before and after.
type cell struct {
	m      *matrix
	ctx    context.Context
	tr     ledger.Transition
	key    string
	id     string       // the subject task
	parent string       // a delivery's approved task (withdraw_delivery)
	item   *ledger.Task // as put, in the cell's state
	read   *ledger.Task // as the caller read it: in the cell's state when that is a from-state, else in the first
	puts   map[string][]any
	err    error
	before items
	after  items
}

func (m *matrix) newCell(t *testing.T, tr ledger.Transition, s ledger.State) *cell {
	c := &cell{m: m, ctx: context.Background(), tr: tr, key: tr.Op + "/" + string(s)}
	c.id = m.l.TaskID("alice", c.key)
	c.parent = m.l.TaskID("alice", "parent/"+c.key)
	c.item = c.fixture(t, s)
	readState := s
	if !slices.Contains(tr.From, s) && len(tr.From) > 0 {
		readState = tr.From[0]
	}
	c.read = c.fixture(t, readState)
	c.puts = map[string][]any{m.env.Names.TasksTable: {c.item}}
	for _, g := range tr.Guards {
		if g.Name == "review open unknown_outcome" || g.Name == "review open at the park" {
			c.puts[m.env.Names.ReviewTable] = []any{ledger.Review{TaskID: c.id, ReviewStatus: ledger.ReviewOpen,
				Reason: ledger.ReviewUnknownOutcome, Summary: "the outcome is unknown", Known: []string{}, Uncertain: []string{},
				SafeActions: []string{}, ParkCount: c.item.ParkCount, DeadLetteredAt: rfc(m.clock.Now())}}
		}
	}
	if tr.Op == "withdraw_delivery" {
		p := c.fixture(t, ledger.StateCompleted)
		p.TaskID, p.ApprovalState, p.DeliveryIDs = c.parent, ledger.ApprovalApproved, []string{c.id}
		c.puts[m.env.Names.TasksTable] = append(c.puts[m.env.Names.TasksTable], p)
	}
	return c
}

// check is the cell's verdict.
func (c *cell) check(t *testing.T) {
	tr, s, err := c.tr, c.item.State, c.err
	allowed := tr.Allows(c.item, c.call())
	switch {
	case slices.Contains(tr.From, s):
		if err != nil {
			t.Fatalf("from %s (a from-state): %v", s, err)
		}
		if !allowed {
			t.Errorf("the engine applied %s from %s, but its Go predicate says no", tr.Op, s)
		}
		c.checkApplied(t, s, c.after[c.m.env.Names.TasksTable][c.id])
	case tr.Repeat && s == tr.To:
		if err != nil {
			t.Fatalf("a repeat in %s: %v", s, err)
		}
		if !reflect.DeepEqual(c.before, c.after) {
			t.Errorf("a repeat in %s wrote:\nbefore %v\nafter  %v", s, c.before, c.after)
		}
	}
	if id := c.followUp(); id != "" {
		_, created := c.after[c.m.env.Names.TasksTable][id]
		if applied := slices.Contains(tr.From, s); created != applied {
			t.Errorf("from %s: the write applied: %v, its follow-up task exists: %v", s, applied, created)
		}
	}
	switch {
	case slices.Contains(tr.From, s), tr.Repeat && s == tr.To:
	default:
		if !refusedAs(err, tr.Refusal) {
			t.Fatalf("from %s: got %v, want a refusal %s", s, err, tr.Refusal)
		}
		if allowed {
			t.Errorf("the engine refused %s from %s, but its Go predicate says yes", tr.Op, s)
		}
		if !reflect.DeepEqual(c.before, c.after) {
			t.Errorf("refused from %s, yet the items changed:\nbefore %v\nafter  %v", s, c.before, c.after)
		}
	}
}

// checkApplied checks the subject task (item, as read after the call) as
// the row says it leaves it.
func (c *cell) checkApplied(t *testing.T, from ledger.State, item map[string]types.AttributeValue) {
	var got ledger.Task
	if err := attributevalue.UnmarshalMap(item, &got); err != nil {
		t.Fatal(err)
	}
	want := c.tr.To
	if want == "" {
		want = from
	}
	if got.State != want {
		t.Errorf("from %s: state %s, want %s", from, got.State, want)
	}
	change := map[ledger.Change]func(int64) int64{
		ledger.Same: func(n int64) int64 { return n }, ledger.Up: func(n int64) int64 { return n + 1 },
		ledger.Down: func(n int64) int64 { return n - 1 }, ledger.Reset: func(int64) int64 { return 0 },
	}
	if w := change[c.tr.Attempts](int64(c.item.Attempts)); int64(got.Attempts) != w {
		t.Errorf("from %s: attempts %d -> %d, want %d (%q)", from, c.item.Attempts, got.Attempts, w, c.tr.Attempts)
	}
	if w := change[c.tr.Version](c.item.AssignmentVersion); got.AssignmentVersion != w {
		t.Errorf("from %s: assignment_version %d -> %d, want %d (%q)", from, c.item.AssignmentVersion, got.AssignmentVersion, w, c.tr.Version)
	}
}

func refusedAs(err error, r ledger.Refusal) bool {
	switch r {
	case ledger.RefusedFenced:
		return errors.As(err, new(*ledger.FencedError))
	case ledger.RefusedNotClaimable:
		return errors.As(err, new(*ledger.NotClaimableError))
	case ledger.RefusedConflict:
		return errors.As(err, new(*ledger.ConflictError))
	case ledger.RefusedDuplicate:
		return errors.As(err, new(*ledger.DuplicateError))
	case ledger.RefusedDeliveriesStarted:
		return errors.As(err, new(*ledger.DeliveriesStartedError))
	case ledger.NotApplied:
		return errors.Is(err, errNotApplied)
	}
	return false
}

// call is what the row's guards compare with in this cell: the same the
// driver's method asks of the item.
func (c *cell) call() ledger.Call {
	return ledger.Call{Now: c.m.clock.Now(), Version: matrixVersion, State: c.read.State, Owner: matrixOwner, Kind: "generate",
		Lease: matrixLease, DueAt: c.read.DueAt, Dispatches: c.read.Dispatches, SHA256: c.read.ResultSHA256,
		Round: c.read.ApprovalRound, Parent: c.parent, Parks: c.read.ParkCount}
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// fixture is the cell's task as it would be in state s, made to satisfy
// every guard of the row but the state itself.
func (c *cell) fixture(t *testing.T, s ledger.State) *ledger.Task {
	now := c.m.clock.Now()
	ms := now.UnixMilli()
	created := now.Add(-10 * time.Minute)
	x := &ledger.Task{TaskID: c.id, State: s, Scope: "alice", IdempotencyKey: c.key, PayloadSHA256: "sha-p",
		Input: `{"prompt":"p"}`, Kind: "generate", CorrelationID: c.id, Attempts: 1, MaxAttempts: 5,
		AssignmentVersion: matrixVersion, CreatedAt: rfc(created), CreatedMs: created.UnixMilli(),
		UpdatedAt: rfc(created), UpdatedMs: created.UnixMilli(), BudgetStartMs: created.UnixMilli(),
		MaxAgeMs: time.Hour.Milliseconds(), DeadlineMs: created.Add(time.Hour).UnixMilli()}
	switch {
	case s.Live():
		x.StateShard, x.DueAt = c.m.l.StateShard(s, c.id), ms+time.Minute.Milliseconds()
	case s.Terminal():
		x.ExpiresAt = now.Add(ledger.DefaultRetention).Unix()
	}
	completed := func() {
		x.Result, x.ResultSHA256, x.CompletedAt = matrixResult, ledger.SHA256Hex(matrixResult), rfc(now)
	}
	switch s {
	case ledger.StateRunning:
		x.LeaseOwner, x.LeaseUntil, x.DueAt = "w", ms+matrixLease.Milliseconds(), ms+matrixLease.Milliseconds()
	case ledger.StateRetryWait:
		x.NotBefore, x.DueAt, x.ErrorClass = ms-1000, ms-1000, "provider_5xx"
	case ledger.StateUnknown:
		x.ErrorClass, x.ErrorMessage = ledger.ReviewUnknownOutcome, ledger.LeaseExpiredMessage
	case ledger.StateAwaitingApproval:
		completed()
		x.ApprovalRequired, x.ApprovalTTLSeconds, x.ApprovalState = true, 3600, ledger.ApprovalPending
		x.ApprovalDeadlineMs, x.DueAt = ms+time.Hour.Milliseconds(), ms+time.Hour.Milliseconds()
	case ledger.StateNeedsReview:
		x.ReviewReason, x.ReviewSummary, x.ParkCount, x.ErrorClass = ledger.ReviewUnknownOutcome, "no readback", 1, ledger.ReviewUnknownOutcome
	case ledger.StateCompleted:
		completed()
	case ledger.StateFailed:
		x.ErrorClass, x.ErrorMessage = "bad_input", "refused"
	case ledger.StateRejected:
		completed()
		x.ApprovalRequired, x.ApprovalTTLSeconds, x.ApprovalState = true, 3600, ledger.ApprovalRejected
	}
	if c.tr.Fence != ledger.FenceNone && !c.tr.Manual {
		x.AssignmentVersion = matrixVersion
	}
	for _, g := range c.tr.Guards {
		satisfy(t, g, x, c, now)
	}
	for _, g := range c.tr.When[s] {
		satisfy(t, g, x, c, now)
	}
	if c.tr.Op == "call_started_renew" {
		x.LeaseUntil = ms + 1000 // too short for the plain mark: it renews
	}
	return x
}

// satisfy makes x meet guard g (by its name), whatever x's state.
func satisfy(t *testing.T, g ledger.Guard, x *ledger.Task, c *cell, now time.Time) {
	ms := now.UnixMilli()
	switch g.Name {
	case "fence", "from", "exists", "attempts left", "before the age deadline", "at version (when given)",
		"due_at as read", "dispatches as read", "no item", "review open unknown_outcome", "review open at the park",
		"approval round as read", "no open review", "call not started", "lapsed lease as read (when given)", "park count as read":
		// The base fixture and the call meet them.
	case "due":
		x.NotBefore = ms - 1000
	case "lease expired":
		x.LeaseUntil = ms - 1000
	case "of the takeover kind":
		x.Kind = "generate"
	case "half a lease left":
		x.LeaseUntil = ms + matrixLease.Milliseconds()
	case "no approval gate":
		x.ApprovalRequired, x.ApprovalTTLSeconds = false, 0
	case "approval gate":
		x.ApprovalRequired, x.ApprovalTTLSeconds = true, 3600
	case "no result yet":
		x.Result, x.ResultRef = "", nil
	case "cancelled while running":
		x.CancelVersion = matrixVersion - 1
	case "cancel of the version before":
		x.CancelVersion = matrixVersion - 1
	case "running, or no cancel pending":
		x.CancelVersion = 0
	case "parked unknown_outcome":
		x.ReviewReason, x.ParkCount = ledger.ReviewUnknownOutcome, 1
	case "my lease owner":
		x.LeaseOwner = matrixOwner
	case "result is the approved artifact", "result as read":
		x.Result, x.ResultSHA256 = matrixResult, ledger.SHA256Hex(matrixResult)
	case "before the approval deadline":
		x.ApprovalDeadlineMs = ms + time.Hour.Milliseconds()
	case "approved":
		x.ApprovalState = ledger.ApprovalApproved
	case "not in by_state":
		x.StateShard = ""
	case "attempt still counted":
		x.ClaimedMs = ms - time.Minute.Milliseconds()
	case "attempt counted, not read back absent":
		x.ClaimedMs, x.OpenUnknownMs = ms-time.Minute.Milliseconds(), ms-time.Minute.Milliseconds()
	case "never claimed":
		x.AssignmentVersion = 0
	case "of the approved task":
		x.ParentTaskID = c.parent
	case "past retention, as read":
		if x.State.Terminal() { // only terminal items carry expires_at
			x.ExpiresAt = now.Add(-time.Hour).Unix()
		}
	default:
		t.Fatalf("guard %q has no fixture here: teach satisfy how to meet it", g.Name)
	}
}

// putAll writes every cell's items with BatchWriteItem.
func (m *matrix) putAll(t *testing.T, cells []*cell) {
	var reqs []types.WriteRequest
	var tables []string
	for _, c := range cells {
		for table, vs := range c.puts {
			for _, v := range vs {
				item, err := attributevalue.MarshalMap(v)
				if err != nil {
					t.Fatal(err)
				}
				reqs, tables = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}}), append(tables, table)
			}
		}
	}
	for len(reqs) > 0 {
		in := &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{}}
		n := min(len(reqs), 25)
		for i := range n {
			in.RequestItems[tables[i]] = append(in.RequestItems[tables[i]], reqs[i])
		}
		reqs, tables = reqs[n:], tables[n:]
		for len(in.RequestItems) > 0 {
			out, err := m.env.DDB.BatchWriteItem(context.Background(), in)
			if err != nil {
				t.Fatalf("put the fixtures: %v", err)
			}
			in.RequestItems = out.UnprocessedItems
		}
	}
}

// readAll reads every item each cell involves, as stored, into the items
// at(c) names, with consistent BatchGetItem calls.
func (m *matrix) readAll(t *testing.T, cells []*cell, at func(c *cell) *items) {
	type ref struct {
		table, id string
		c         *cell
	}
	var refs []ref
	for _, c := range cells {
		*at(c) = items{m.env.Names.TasksTable: {}, m.env.Names.ReviewTable: {}}
		refs = append(refs, ref{m.env.Names.TasksTable, c.id, c}, ref{m.env.Names.ReviewTable, c.id, c})
		if c.tr.Op == "withdraw_delivery" {
			refs = append(refs, ref{m.env.Names.TasksTable, c.parent, c})
		}
		if id := c.followUp(); id != "" {
			refs = append(refs, ref{m.env.Names.TasksTable, id, c})
		}
	}
	owner := map[[2]string]*cell{}
	for len(refs) > 0 {
		n := min(len(refs), 100)
		in := &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{}}
		for _, r := range refs[:n] {
			owner[[2]string{r.table, r.id}] = r.c
			ka := in.RequestItems[r.table]
			ka.ConsistentRead = aws.Bool(true)
			ka.Keys = append(ka.Keys, map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: r.id}})
			in.RequestItems[r.table] = ka
		}
		refs = refs[n:]
		for len(in.RequestItems) > 0 {
			out, err := m.env.DDB.BatchGetItem(context.Background(), in)
			if err != nil {
				t.Fatalf("read the items: %v", err)
			}
			for table, got := range out.Responses {
				for _, item := range got {
					id := item["task_id"].(*types.AttributeValueMemberS).Value
					(*at(owner[[2]string{table, id}]))[table][id] = item
				}
			}
			in.RequestItems = out.UnprocessedKeys
		}
	}
}

func ok(applied bool, err error) error {
	if err == nil && !applied {
		return errNotApplied
	}
	return err
}

var matrixLapsed = ledger.LapsedResolution{By: "worker w", Note: "the answer arrived after the park"}

// driveRow calls each row's method as its caller would, for cell c.
var driveRow = map[string]func(c *cell) error{
	"create": func(c *cell) error {
		return ignore(c.m.l.Create(c.ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: c.key, Kind: "generate", Input: `{"prompt":"p"}`, PayloadSHA256: "sha-p"}))
	},
	"claim": func(c *cell) error {
		return ignore(c.m.l.Claim(c.ctx, c.id, ledger.ClaimOptions{Owner: "w2", Lease: matrixLease}))
	},
	"claim_retry": func(c *cell) error {
		return ignore(c.m.l.ClaimRetry(c.ctx, c.read, ledger.ClaimOptions{Owner: "w2", Lease: matrixLease}))
	},
	"adopt": func(c *cell) error {
		_, applied, err := c.m.l.Adopt(c.ctx, c.read)
		return ok(applied, err)
	},
	"claim_takeover": func(c *cell) error {
		return ignore(c.m.l.TakeOver(c.ctx, c.read, ledger.ClaimOptions{Owner: "w2", Lease: matrixLease, TakeoverKind: "generate"}))
	},
	"renew": func(c *cell) error { return ignore(c.m.l.Renew(c.ctx, c.id, matrixVersion, matrixLease)) },
	"call_started": func(c *cell) error {
		return ignore(c.m.l.MarkCallStarted(c.ctx, c.id, matrixVersion, matrixLease))
	},
	"complete": func(c *cell) error {
		return ignore(c.m.l.Complete(c.ctx, c.id, matrixVersion, ledger.Completion{Result: matrixResult}))
	},
	"complete_gated": func(c *cell) error {
		return ignore(c.m.l.Complete(c.ctx, c.id, matrixVersion, ledger.Completion{Result: matrixResult, ApprovalTTL: time.Hour}))
	},
	"complete_follow_ups": func(c *cell) error {
		return ignore(c.m.l.Complete(c.ctx, c.id, matrixVersion, ledger.Completion{Result: matrixResult}, c.withFollowUp(ledger.StateCompleted)))
	},
	"complete_gated_follow_ups": func(c *cell) error {
		return ignore(c.m.l.Complete(c.ctx, c.id, matrixVersion, ledger.Completion{Result: matrixResult, ApprovalTTL: time.Hour},
			c.withFollowUp(ledger.StateAwaitingApproval)))
	},
	"fail_follow_ups": func(c *cell) error {
		return ignore(c.m.l.Fail(c.ctx, c.id, matrixVersion, "bad_input", "refused", c.withFollowUp(ledger.StateFailed)))
	},
	"park_follow_ups": func(c *cell) error {
		return ignore(c.m.l.Park(c.ctx, c.read, ledger.ParkOptions{State: c.read.State, Version: matrixVersion, FollowUps: []ledger.NewTask{c.followUpTask()}},
			ledger.Review{Reason: ledger.ReviewBudgetExhausted, Summary: "out of budget"}))
	},
	"retry": func(c *cell) error {
		return ignore(c.m.l.ScheduleRetry(c.ctx, c.id, matrixVersion, c.m.clock.Now().Add(time.Minute), "provider_5xx", "busy"))
	},
	"retry_after_refusal": func(c *cell) error {
		return ignore(c.m.l.ScheduleRetry(c.ctx, c.id, matrixVersion, c.m.clock.Now().Add(time.Minute), "provider_throttled", "429", ledger.AfterRefusal()))
	},
	"retry_uncertain": func(c *cell) error {
		return ignore(c.m.l.ScheduleRetryUncertain(c.ctx, c.id, matrixVersion, c.m.clock.Now().Add(time.Minute), "reply lost"))
	},
	"fail": func(c *cell) error {
		return ignore(c.m.l.Fail(c.ctx, c.id, matrixVersion, "bad_input", "refused"))
	},
	"fail_after_refusal": func(c *cell) error {
		return ignore(c.m.l.Fail(c.ctx, c.id, matrixVersion, "bad_input", "refused", ledger.AfterRefusal()))
	},
	"unknown": func(c *cell) error {
		return ignore(c.m.l.MarkUnknown(c.ctx, c.id, matrixVersion, ledger.ReviewUnknownOutcome, "timeout"))
	},
	"release":          func(c *cell) error { return ignore(c.m.l.Release(c.ctx, c.id, matrixVersion)) },
	"release_unknown":  func(c *cell) error { return ignore(c.m.l.ReleaseUnknown(c.ctx, c.id, matrixVersion)) },
	"release_requeued": func(c *cell) error { return ignore(c.m.l.ReleaseRequeued(c.ctx, c.id, matrixVersion)) },
	"release_claim": func(c *cell) error {
		_, applied, err := c.m.l.ReleaseClaim(c.ctx, c.id, matrixOwner, matrixVersion)
		return ok(applied, err)
	},
	"wait_admission": func(c *cell) error {
		return ignore(c.m.l.WaitAdmission(c.ctx, c.id, matrixVersion, c.m.clock.Now().Add(time.Minute)))
	},
	"requeue": func(c *cell) error {
		return ignore(c.m.l.Requeue(c.ctx, c.id, ledger.StateRunning, matrixVersion))
	},
	"requeue_unstarted": func(c *cell) error { return ignore(c.m.l.RequeueUnstarted(c.ctx, c.id, matrixVersion)) },
	"expire":            func(c *cell) error { return ignore(c.m.l.ExpireToUnknown(c.ctx, c.id, matrixVersion)) },
	"complete_readback": func(c *cell) error {
		return ignore(c.m.l.CompleteFromReadback(c.ctx, c.id, matrixVersion, ledger.Completion{Result: matrixResult}))
	},
	"complete_readback_gated": func(c *cell) error {
		return ignore(c.m.l.CompleteFromReadback(c.ctx, c.id, matrixVersion, ledger.Completion{Result: matrixResult, ApprovalTTL: time.Hour}))
	},
	"requeue_readback_absent": func(c *cell) error {
		return ignore(c.m.l.Requeue(c.ctx, c.id, ledger.StateUnknown, matrixVersion))
	},
	"requeue_readback_absent_call_may_run": func(c *cell) error {
		return ignore(c.m.l.RequeueCallMayRun(c.ctx, &ledger.Task{TaskID: c.id, AssignmentVersion: matrixVersion, DueAt: c.m.clock.Now().Add(-time.Minute).UnixMilli()}))
	},
	"requeue_retry_safe": func(c *cell) error { return ignore(c.m.l.RequeueRetrySafe(c.ctx, c.id, matrixVersion)) },
	"await_readback": func(c *cell) error {
		return ignore(c.m.l.AwaitReadback(c.ctx, c.id, matrixVersion, c.m.clock.Now().Add(-time.Minute)))
	},
	"defer_readback": func(c *cell) error {
		return ignore(c.m.l.DeferReadback(c.ctx, c.id, matrixVersion, c.m.clock.Now().Add(-time.Minute), c.m.clock.Now()))
	},
	"dispatch": func(c *cell) error {
		_, applied, err := c.m.l.ClaimDispatch(c.ctx, c.read)
		return ok(applied, err)
	},
	"park": func(c *cell) error {
		return ignore(c.m.l.Park(c.ctx, c.read, ledger.ParkOptions{State: c.read.State, Version: matrixVersion},
			ledger.Review{Reason: ledger.ReviewBudgetExhausted, Summary: "out of budget"}))
	},
	"park_expired_lease": func(c *cell) error {
		return ignore(c.m.l.Park(c.ctx, c.read, ledger.ParkOptions{State: c.read.State, Version: matrixVersion, LeaseExpired: true},
			ledger.Review{Reason: ledger.ReviewStaleLease, Summary: "the lease expired"}))
	},
	"cancel":         func(c *cell) error { return ignore(c.m.l.Cancel(c.ctx, c.id)) },
	"cancel_running": func(c *cell) error { return ignore(c.m.l.CancelRunning(c.ctx, c.read)) },
	"cancel_unknown": func(c *cell) error {
		return ignore(c.m.l.CancelUnknown(c.ctx, c.id, matrixVersion, "no call started"))
	},
	"complete_cancelled": func(c *cell) error {
		return ignore(c.m.l.CompleteCancelled(c.ctx, c.id, matrixVersion, ledger.Completion{Result: matrixResult}))
	},
	"complete_cancelled_gated": func(c *cell) error {
		return ignore(c.m.l.CompleteCancelled(c.ctx, c.id, matrixVersion, ledger.Completion{Result: matrixResult, ApprovalTTL: time.Hour}))
	},
	"complete_lapsed": func(c *cell) error {
		return ignore(c.m.l.CompleteLapsed(c.ctx, c.id, matrixVersion, ledger.Completion{Result: matrixResult}, matrixLapsed))
	},
	"complete_lapsed_gated": func(c *cell) error {
		return ignore(c.m.l.CompleteLapsed(c.ctx, c.id, matrixVersion, ledger.Completion{Result: matrixResult, ApprovalTTL: time.Hour}, matrixLapsed))
	},
	"fail_lapsed": func(c *cell) error {
		return ignore(c.m.l.FailLapsed(c.ctx, c.id, matrixVersion, "bad_input", "refused", matrixLapsed))
	},
	"retry_lapsed": func(c *cell) error {
		return ignore(c.m.l.RetryLapsed(c.ctx, c.id, matrixVersion, c.m.clock.Now().Add(time.Minute), "provider_5xx", "busy", matrixLapsed))
	},
	"release_lapsed": func(c *cell) error { return ignore(c.m.l.ReleaseLapsed(c.ctx, c.id, matrixVersion, matrixLapsed)) },
	"cancel_lapsed": func(c *cell) error {
		return ignore(c.m.l.CancelLapsed(c.ctx, c.id, matrixVersion, "the call was refused", matrixLapsed))
	},
	"revise_lapsed": func(c *cell) error {
		return ignore(c.m.l.ReviseLapsed(c.ctx, c.id, matrixVersion, ledger.Review{Reason: ledger.ReviewResultTooLarge, Summary: "too large"}))
	},
	"approve": func(c *cell) error {
		return ignore2(c.m.l.Approve(c.ctx, c.read, ledger.ApproveRequest{ArtifactSHA256: c.read.ResultSHA256, By: "jwt:bob"}))
	},
	"reject": func(c *cell) error { return ignore2(c.m.l.Reject(c.ctx, c.read, "jwt:bob", "no", "test")) },
	"withdraw": func(c *cell) error {
		return ignore(c.m.l.Withdraw(c.ctx, c.id, "jwt:bob", "", ""))
	},
	"withdraw_delivery": func(c *cell) error {
		return ignore(c.m.l.Withdraw(c.ctx, c.parent, "jwt:bob", "", ""))
	},
	"expire_approval": func(c *cell) error {
		return ignore(c.m.l.ExpireApproval(c.ctx, c.read, ledger.Review{Summary: "nobody decided in time"}))
	},
	"expire_approval_follow_ups": func(c *cell) error {
		return ignore(c.m.l.ExpireApproval(c.ctx, c.read, ledger.Review{Summary: "nobody decided in time"}, c.followUpTask()))
	},
	"operator_retry":     act(ledger.ResolutionRetry),
	"operator_completed": act(ledger.ResolutionCompleted),
	"operator_failed":    act(ledger.ResolutionFailed),
}

// followUpTask is the one follow-up task a "_follow_ups" row's driver
// creates with its write.
func (c *cell) followUpTask() ledger.NewTask {
	return ledger.NewTask{Scope: "alice", IdempotencyKey: "notify:" + c.key, Kind: ledger.KindDeliver, ParentTaskID: c.id,
		Input: `{"destination":"notify","params":{},"payload":{"event":"x"}}`, PayloadSHA256: "sha-f"}
}

// followUp is the id of the cell's follow-up task ("" for a row without).
func (c *cell) followUp() string {
	if !strings.HasSuffix(c.tr.Op, "_follow_ups") {
		return ""
	}
	return c.m.l.TaskID("alice", "notify:"+c.key)
}

func (c *cell) withFollowUp(to ledger.State) ledger.WriteOption {
	return ledger.WithFollowUps(map[ledger.State][]ledger.NewTask{to: {c.followUpTask()}})
}

func act(resolution string) func(c *cell) error {
	return func(c *cell) error {
		return ignore3(c.m.l.Act(c.ctx, c.id, ledger.OperatorAction{Resolution: resolution, By: "ops", Note: "decided"}))
	}
}

func init() {
	driveRow["recreate"] = driveRow["create"]
	driveRow["call_started_renew"] = driveRow["call_started"]
}
