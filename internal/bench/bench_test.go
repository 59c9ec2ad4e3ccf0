package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/bench"
	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The happy path's AWS calls per task equal the DESIGN §9 budget, and the
// reconciler's reads do not grow with completed history. Counts only: the
// bench reports timings, tests never judge them.
func TestBudgets(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		cfg := bench.Config{Tasks: 60, Callers: 4, LatencySubmits: 5, History: []int{10, 400}, SkipBuild: true, SkipCost: true, SkipLatency: true, AdmissionTasks: -1}
		if e.Backend == "moto" {
			cfg.Tasks, cfg.History = 20, []int{10, 100}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		res, err := bench.Run(ctx, &soak.Backend{Name: e.Backend, AWS: e.AWS}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var table bytes.Buffer
		res.WriteTable(&table)
		if ex := res.Excess(); len(ex) > 0 {
			t.Errorf("calls over the §9 budget: %+v\n%s", ex, table.String())
		}
		want := map[string]float64{
			"submit DynamoDB.PutItem":    2, // the watch item, then the task
			"submit SQS.SendMessage":     1,
			"worker DynamoDB.UpdateItem": 2,
		}
		for _, c := range res.Calls {
			k := c.Component + " " + c.Op
			if w, ok := want[k]; ok {
				if c.PerTask != w {
					t.Errorf("%s: %.2f calls per task, want exactly %g", k, c.PerTask, w)
				}
				delete(want, k)
			}
		}
		if len(want) > 0 {
			t.Errorf("calls never made: %v", want)
		}
		if n := len(res.Reconciler); n != 2 {
			t.Fatalf("%d reconciler rows", n)
		}
		// Flat in completed history once the cursors passed its watch
		// items: the same calls and read units. Items read differ only by
		// the cursor items, one per shard that has one (a shard the smaller
		// history left without a cursor has none): each run's cursor
		// Queries read them, and each shard's watch Query starts at its
		// cursor's own item (BETWEEN is inclusive). A bound per shard, far
		// below the history's difference.
		small, large := res.Reconciler[0], res.Reconciler[1]
		if small.ReadCalls != large.ReadCalls || small.RRU != large.RRU || large.ItemsRead < small.ItemsRead || large.ItemsRead-small.ItemsRead > 4*16 {
			t.Errorf("reconciler reads grew with history: %d completed → %d calls / %d items / %g RRU, %d completed → %d calls / %d items / %g RRU",
				small.Completed, small.ReadCalls, small.ItemsRead, small.RRU, large.Completed, large.ReadCalls, large.ItemsRead, large.RRU)
		}
		// The history's watch items were each read once, by the run(s)
		// when they came due; the measured run reads none, and counts the
		// live tasks' (not due) as not yet checked.
		for _, row := range res.Reconciler {
			if row.Due.Watched != row.Completed || row.Watched != 0 || row.Pending != row.Live {
				t.Errorf("%d completed: the runs when they came due read %d watch items, the measured run %d, not yet checked %d; want %d, 0 and the %d live",
					row.Completed, row.Due.Watched, row.Watched, row.Pending, row.Completed, row.Live)
			}
		}
		if large.Calls["DynamoDB.Scan"] != 0 {
			t.Error("the reconciler scanned the table")
		}
		if !strings.Contains(table.String(), "full/bare throughput ratio") {
			t.Errorf("the table lacks the throughput ratio:\n%s", table.String())
		}
	})
}
