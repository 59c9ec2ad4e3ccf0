package local

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestStatusLineCountsSubmittedTasksNotYetChecked: with a watch table a
// submitted task is in no live count until the reconciler adopts it at
// its dispatch deadline; the status line shows it meanwhile as
// "submitted, not yet checked", so `make run` never shows a queued task
// in neither figure. Without a watch table the figure is left out.
func TestStatusLineCountsSubmittedTasksNotYetChecked(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))
		l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable,
			WatchTable: e.Names.WatchTable, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if _, err := l.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: "k" + strconv.Itoa(i), Kind: "generate",
				Input: `{"prompt":"hi"}`, PayloadSHA256: "sha" + strconv.Itoa(i)}); err != nil {
				t.Fatal(err)
			}
		}
		check := func(what string, pending, active int) {
			t.Helper()
			st, err := readStatus(ctx, l)
			if err != nil {
				t.Fatal(err)
			}
			line := st.String()
			if st.pending != pending || st.live[ledger.StateActive] != active ||
				!strings.Contains(line, "submitted, not yet checked="+strconv.Itoa(pending)) || !strings.Contains(line, "active="+strconv.Itoa(active)) {
				t.Errorf("%s: %q; want %d submitted, not yet checked and %d active", what, line, pending, active)
			}
		}
		check("before any reconciler run", 2, 0)

		clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		h := &reconciler.Handler{Ledger: l, Dispatch: &dispatch.Sender{SQS: e.SQS, QueueURL: e.Names.TaskQueueURL}}
		if sum, err := h.Handle(ctx, []byte(`{}`)); err != nil || sum.Adopted != 2 {
			t.Fatalf("reconciler run: adopted %d, err %v; want 2", sum.Adopted, err)
		}
		check("after the run adopted them", 0, 2)

		plain, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		st, err := readStatus(ctx, plain)
		if err != nil {
			t.Fatal(err)
		}
		if line := st.String(); strings.Contains(line, "not yet checked") {
			t.Errorf("no watch table: %q shows a watch figure", line)
		}
	})
}
