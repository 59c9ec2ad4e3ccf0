package tasklist_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

type bundle struct {
	l     *ledger.Ledger
	lists *tasklist.Reader
	clock *testenv.Clock
}

func setup(t *testing.T, e *testenv.Env, mod ...func(*ledger.Config)) *bundle {
	t.Helper()
	c := testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	cfg := ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, Now: c.Now}
	for _, m := range mod {
		m(&cfg)
	}
	l, err := ledger.New(e.DDB, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{l: l, lists: tasklist.New(l), clock: c}
}

func newTask(key, payload string) ledger.NewTask {
	return ledger.NewTask{Scope: "alice", IdempotencyKey: key, Kind: "generate",
		Input: `{"prompt":"` + payload + `"}`, PayloadSHA256: "sha-" + payload}
}

func mustCreate(t *testing.T, b *bundle, key string) *ledger.Task {
	t.Helper()
	task, err := b.l.Create(context.Background(), newTask(key, "p"))
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	return task
}

// walkOwner pages through ListByOwner to the end and returns the ids in
// order, and the number of pages.
func walkOwner(t *testing.T, r *tasklist.Reader, q tasklist.OwnerQuery) ([]string, int) {
	t.Helper()
	var ids []string
	for pages := 1; ; pages++ {
		p, err := r.ListByOwner(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range p.Tasks {
			ids = append(ids, task.TaskID)
		}
		if p.Next == "" {
			return ids, pages
		}
		if pages > 50 {
			t.Fatal("more than 50 pages")
		}
		q.Cursor = p.Next
	}
}

// A state filter that drops more tasks than one call may read ends the
// page early, with a cursor, and the walk still shows each match once,
// newest first.
func TestListByOwnerBoundsReadsAndContinuesPastWhatTheFilterDrops(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		var cancelled []string
		n := tasklist.MaxListReads + 30
		for i := range n {
			task := mustCreate(t, b, fmt.Sprintf("k-%d", i))
			if i%60 == 0 {
				if _, err := b.l.Cancel(ctx, task.TaskID); err != nil {
					t.Fatal(err)
				}
				cancelled = append([]string{task.TaskID}, cancelled...)
			}
			b.clock.Advance(time.Millisecond)
		}
		got, pages := walkOwner(t, b.lists, tasklist.OwnerQuery{Scope: "alice", States: []ledger.State{ledger.StateCancelled}, Limit: 10})
		if !slices.Equal(got, cancelled) {
			t.Fatalf("cancelled walk = %v, want %v", got, cancelled)
		}
		if pages < 2 {
			t.Fatalf("%d tasks read in one call (at most %d)", n, tasklist.MaxListReads)
		}
		all, _ := walkOwner(t, b.lists, tasklist.OwnerQuery{Scope: "alice", Limit: tasklist.MaxListLimit})
		if len(all) != n {
			t.Fatalf("unfiltered walk shows %d tasks, want %d", len(all), n)
		}
		if _, err := b.lists.ListByOwner(ctx, tasklist.OwnerQuery{Scope: "bob", Limit: 1, Cursor: "x.y"}); !errors.Is(err, tasklist.ErrBadCursor) {
			t.Fatalf("a made-up cursor: %v, want ErrBadCursor", err)
		}
	})
}

// More tasks awaiting approval than one shard page holds: the merge across
// shards pages through them in deadline order, each once.
func TestListAwaitingApprovalMergesShardsInDeadlineOrder(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, func(c *ledger.Config) { c.Shards = 2 })
		ctx := context.Background()
		type due struct {
			id string
			at int64
		}
		var want []due
		for i := range 60 {
			n := newTask(fmt.Sprintf("g-%d", i), fmt.Sprintf("p%d", i))
			n.Plan, n.ApprovalTTL = `{"approval":{"required":true}}`, time.Duration(1+(i*37)%60)*time.Minute
			task, err := b.l.Create(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			done, err := b.l.Complete(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"r":1}`, ApprovalTTL: c.ApprovalTTL()})
			if err != nil {
				t.Fatal(err)
			}
			if i%10 != 3 { // Keep drops every tenth
				want = append(want, due{done.TaskID, done.ApprovalDeadlineMs})
			}
		}
		slices.SortFunc(want, func(a, b due) int {
			if a.at != b.at {
				return int(a.at - b.at)
			}
			if a.id < b.id {
				return -1
			}
			return 1
		})
		keep := func(task *ledger.Task) bool {
			return slices.ContainsFunc(want, func(d due) bool { return d.id == task.TaskID })
		}
		var got []string
		q := tasklist.InboxQuery{Viewer: "carol", Keep: keep, Limit: 7}
		for pages := 0; ; pages++ {
			p, err := b.lists.ListAwaitingApproval(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range p.Tasks {
				got = append(got, task.TaskID)
			}
			if p.Next == "" {
				break
			}
			if pages > 30 {
				t.Fatal("more than 30 pages")
			}
			q.Cursor = p.Next
		}
		var wantIDs []string
		for _, d := range want {
			wantIDs = append(wantIDs, d.id)
		}
		if !slices.Equal(got, wantIDs) {
			t.Fatalf("inbox walk =\n%v\nwant\n%v", got, wantIDs)
		}
		// Another viewer cannot continue carol's walk.
		first, err := b.lists.ListAwaitingApproval(ctx, tasklist.InboxQuery{Viewer: "carol", Keep: keep, Limit: 1})
		if err != nil || first.Next == "" {
			t.Fatalf("first page: %v %v", first, err)
		}
		if _, err := b.lists.ListAwaitingApproval(ctx, tasklist.InboxQuery{Viewer: "dave", Keep: keep, Limit: 1, Cursor: first.Next}); !errors.Is(err, tasklist.ErrBadCursor) {
			t.Fatalf("carol's cursor as dave: %v, want ErrBadCursor", err)
		}
	})
}
