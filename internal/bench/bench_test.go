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
			"submit DynamoDB.PutItem":    1,
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
		small, large := res.Reconciler[0], res.Reconciler[1]
		if small.ReadCalls != large.ReadCalls || small.ItemsRead != large.ItemsRead {
			t.Errorf("reconciler reads grew with history: %d completed → %d calls / %d items, %d completed → %d calls / %d items",
				small.Completed, small.ReadCalls, small.ItemsRead, large.Completed, large.ReadCalls, large.ItemsRead)
		}
		if large.Calls["DynamoDB.Scan"] != 0 {
			t.Error("the reconciler scanned the table")
		}
		if !strings.Contains(table.String(), "full/bare throughput ratio") {
			t.Errorf("the table lacks the throughput ratio:\n%s", table.String())
		}
	})
}
