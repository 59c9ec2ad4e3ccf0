package reconciler_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// DESIGN §1.1: every task ends final "within its age budget plus one
// reconciler period". The watch phase runs before the walk and counts
// each adopted due task against MaxPerRun; while the submissions still
// queued at their dispatch deadline (a worker backlog) number MaxPerRun
// or more per period, every run spends its whole allowance in the watch
// phase and the walk — expired leases, retry_wait relays, unknown
// readbacks, age-budget parks — never starts. Before the watch, those
// submissions were in by_state beside the rest, walked in due_at order
// round-robin over the streams, so a task past its age budget was reached.
//
// Scaled down: one shard, MaxPerRun 2, a period of one minute, two
// submissions per period that no worker claims. Task T (2 min age
// budget) is adopted and relayed by the first run; from then on it needs
// the walk. Six periods later — four past its age deadline — it must be
// parked.
func TestTaskPastItsAgeBudgetIsParkedWhileDueSubmissionsKeepComing(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setupShards(t, e, 1)
		aged := create(t, b, "aged", func(n *ledger.NewTask) { n.MaxAge = 2 * time.Minute })
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		h := b.handler()
		h.MaxPerRun = 2
		if s := handle(t, h); s.Adopted != 1 {
			t.Fatalf("first run: %+v; want T adopted", s)
		}
		var last string
		for period := range 6 {
			for i := range 2 {
				create(t, b, "backlog-"+strconv.Itoa(period)+"-"+strconv.Itoa(i))
			}
			b.clock.Advance(time.Minute)
			h := b.handler()
			h.MaxPerRun = 2
			s := handle(t, h)
			last = "watched " + strconv.Itoa(s.Watched) + ", examined " + strconv.Itoa(s.Examined) + ", parked " + strconv.Itoa(s.Parked) +
				", partial " + strconv.FormatBool(s.Partial)
		}
		got := get(t, b, aged.TaskID)
		if got.State != ledger.StateNeedsReview {
			t.Fatalf("task %s is %s %v past its age deadline (last run: %s); want parked within one period",
				aged.TaskID, got.State, b.clock.Now().Sub(time.UnixMilli(got.DeadlineMs)), last)
		}
	})
}
