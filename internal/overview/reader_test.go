package overview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/overview"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var ctx = context.Background()

const secret = "PROMPT-TEXT-MUST-NOT-LEAK"

type fixture struct {
	l     *ledger.Ledger
	clock *testenv.Clock
	n     int
	ids   []string
}

func newFixture(t *testing.T, e *testenv.Env, shards int) *fixture {
	t.Helper()
	clock := testenv.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable,
		Now: clock.Now, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{l: l, clock: clock}
}

func (f *fixture) create(t *testing.T) *ledger.Task {
	t.Helper()
	f.n++
	task, err := f.l.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: fmt.Sprintf("k%d", f.n), Kind: "generate",
		Input: `{"prompt":"` + secret + `"}`, PayloadSHA256: fmt.Sprintf("sha%d", f.n), MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	f.ids = append(f.ids, task.TaskID)
	return task
}

func (f *fixture) claim(t *testing.T, task *ledger.Task) *ledger.Task {
	t.Helper()
	out, err := f.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *fixture) park(t *testing.T, task *ledger.Task, r func(*ledger.Task) ledger.Review) {
	t.Helper()
	task = f.claim(t, task)
	if _, err := f.l.Park(ctx, task, ledger.ParkOptions{State: task.State, Version: task.AssignmentVersion}, r(task)); err != nil {
		t.Fatal(err)
	}
}

func byState(o overview.Overview) map[ledger.State]overview.StateFigures {
	m := map[ledger.State]overview.StateFigures{}
	for _, s := range o.States {
		m[s.State] = s
	}
	return m
}

// TestReader: counts, oldest ages and reviews by reason, as the ledger
// holds them, in one bounded read; no task text in the response.
func TestReader(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		f := newFixture(t, e, 0)
		// Two queued: the first is 90 s older.
		f.create(t)
		f.clock.Advance(90 * time.Second)
		f.create(t)
		// One running (created 60 s before the read).
		f.clock.Advance(30 * time.Second)
		f.claim(t, f.create(t))
		// One retry_wait.
		rt := f.claim(t, f.create(t))
		if _, err := f.l.ScheduleRetry(ctx, rt.TaskID, rt.AssignmentVersion, f.clock.Now().Add(time.Minute), "transient", "503"); err != nil {
			t.Fatal(err)
		}
		// One unknown.
		un := f.claim(t, f.create(t))
		if _, err := f.l.MarkUnknown(ctx, un.TaskID, un.AssignmentVersion, "uncertain", "timeout"); err != nil {
			t.Fatal(err)
		}
		// Parked: two budget_exhausted, one provider_config.
		budget := func(task *ledger.Task) ledger.Review { return review.BudgetExhausted(task, review.BudgetAttempts) }
		f.park(t, f.create(t), budget)
		f.park(t, f.create(t), budget)
		f.park(t, f.create(t), func(task *ledger.Task) ledger.Review {
			return review.ProviderConfig(task, "simulated", review.Failure{Class: "permanent_config", Reason: "http_401", HTTPStatus: 401, Message: "bad key"})
		})
		f.clock.Advance(60 * time.Second)

		r := &overview.Reader{Ledger: f.l, Now: f.clock.Now, Rates: overview.NewRates()}
		o, err := r.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st := byState(o)
		// Queued and running share by_state's active partition.
		want := map[ledger.State]int{ledger.StateActive: 3, ledger.StateRetryWait: 1, ledger.StateUnknown: 1}
		for s, n := range want {
			if st[s].Count != n || !st[s].OldestExact {
				t.Errorf("%s: count %d exact=%t, want %d exact", s, st[s].Count, st[s].OldestExact, n)
			}
		}
		if got := st[ledger.StateActive].OldestAgeSeconds; got != 180 {
			t.Errorf("oldest active age = %v s, want 180", got)
		}
		if o.Reviews.Open != 3 || o.Reviews.ByReason[ledger.ReviewBudgetExhausted] != 2 ||
			o.Reviews.ByReason[ledger.ReviewProviderConfig] != 1 || o.Reviews.Truncated {
			t.Errorf("reviews = %+v, want 3 open: 2 budget_exhausted, 1 provider_config", o.Reviews)
		}
		// Every partition × 16 shards, one Query each, + one review page.
		if want := len(ledger.Partitions)*ledger.DefaultShards + 1; o.Cost.Queries != want {
			t.Errorf("queries = %d, want %d", o.Cost.Queries, want)
		}
		if o.Rates == nil || o.Rates.Series["tokens"] != nil {
			t.Errorf("rates = %+v, want a view with tokens null (no data)", o.Rates)
		}
		b, _ := json.Marshal(o)
		for _, leak := range append([]string{secret, "bad key", "alice"}, f.ids...) {
			if strings.Contains(string(b), leak) {
				t.Errorf("overview JSON contains %q: %s", leak, b)
			}
		}

		// Within MinInterval the read is shared: a new task is not seen
		// and nothing is queried; after it, it is.
		f.create(t)
		again, err := r.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !again.GeneratedAt.Equal(o.GeneratedAt) || byState(again)[ledger.StateActive].Count != 3 {
			t.Errorf("second read within MinInterval: generated %s, active %d; want the shared read (%s, 3)",
				again.GeneratedAt, byState(again)[ledger.StateActive].Count, o.GeneratedAt)
		}
		f.clock.Advance(overview.DefaultMinInterval)
		third, err := r.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if byState(third)[ledger.StateActive].Count != 4 {
			t.Errorf("read after MinInterval: active %d, want 4", byState(third)[ledger.StateActive].Count)
		}
	})
}

// TestReaderFullShard: a shard with more entries than one page is counted
// in full (Select COUNT) and its oldest age is marked a lower bound.
func TestReaderFullShard(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		f := newFixture(t, e, 1)
		for range 5 {
			f.create(t)
			f.clock.Advance(10 * time.Second)
		}
		r := &overview.Reader{Ledger: f.l, Now: f.clock.Now, PageLimit: 2, MinInterval: -1}
		o, err := r.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		q := byState(o)[ledger.StateActive]
		if q.Count != 5 || q.OldestExact {
			t.Errorf("queued: count %d exact=%t, want 5, not exact", q.Count, q.OldestExact)
		}
		if q.OldestAgeSeconds <= 0 || q.OldestAgeSeconds > 50 {
			t.Errorf("queued oldest age %v s, want in (0, 50]", q.OldestAgeSeconds)
		}
		if o.Rates != nil {
			t.Errorf("rates = %+v without a Rates, want null", o.Rates)
		}
		// Every partition × 1 shard + one COUNT for the full shard + one review page.
		if want := len(ledger.Partitions) + 1 + 1; o.Cost.Queries != want {
			t.Errorf("queries = %d, want %d", o.Cost.Queries, want)
		}
	})
}

// BenchmarkReaderIdle measures one uncached read of an idle stack on kumo:
// its DynamoDB queries (reported as queries/op) and its time.
func BenchmarkReaderIdle(b *testing.B) {
	e := testenv.New(b, "kumo")
	l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable})
	if err != nil {
		b.Fatal(err)
	}
	r := &overview.Reader{Ledger: l, MinInterval: -1}
	queries := 0
	for b.Loop() {
		o, err := r.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		queries = o.Cost.Queries
	}
	b.ReportMetric(float64(queries), "queries/op")
}
