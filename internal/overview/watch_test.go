package overview_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/overview"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestReaderCountsSubmittedTasksNotYetChecked: with a watch table a
// submitted task is in no by_state count until the reconciler reads its
// watch item at its dispatch deadline and adopts it; the overview shows
// those tasks as "submitted, not yet checked" (watch items past each
// shard's cursor), so a queued task is never missing from both figures,
// and counts the Queries that cost.
func TestReaderCountsSubmittedTasksNotYetChecked(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))
		l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable,
			WatchTable: e.Names.WatchTable, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{l: l, clock: clock}
		for range 3 {
			f.create(t)
		}
		r := &overview.Reader{Ledger: l, Now: clock.Now, MinInterval: -1}
		read := func(what string, pending, active int) overview.Overview {
			t.Helper()
			o, err := r.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if o.Watch == nil || o.Watch.Pending != pending || byState(o)[ledger.StateActive].Count != active {
				t.Errorf("%s: watch %+v, active %d; want %d submitted, not yet checked, and %d active", what, o.Watch, byState(o)[ledger.StateActive].Count, pending, active)
			}
			// Every partition × 16 shards; the cursors' Query and one
			// COUNT per shard of the watch table; one review page.
			if want := len(ledger.Partitions)*ledger.DefaultShards + 1 + ledger.DefaultShards + 1; o.Cost.Queries != want {
				t.Errorf("%s: queries = %d, want %d", what, o.Cost.Queries, want)
			}
			return o
		}
		read("before any reconciler run", 3, 0)

		// Past their dispatch deadline the reconciler reads the watch
		// items, adopts the three (still queued) and moves the cursors.
		clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		h := &reconciler.Handler{Ledger: l, Dispatch: &dispatch.Sender{SQS: e.SQS, QueueURL: e.Names.TaskQueueURL}}
		sum, err := h.Handle(ctx, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if sum.Adopted != 3 {
			t.Fatalf("the reconciler adopted %d tasks, want 3 (summary %+v)", sum.Adopted, sum)
		}
		read("after the run", 0, 3)

		// A submission after the run is pending again, behind the cursor.
		f.create(t)
		read("after one more submit", 1, 3)

		// Without a watch table there is no such figure (null), and every
		// queued task is counted in by_state.
		plain, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		o, err := (&overview.Reader{Ledger: plain, Now: clock.Now, MinInterval: -1}).Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if o.Watch != nil {
			t.Errorf("no watch table: watch %+v, want null", o.Watch)
		}
	})
}
