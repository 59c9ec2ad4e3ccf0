package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRelayBacksOffUnderBacklog: a task whose message sits unconsumed in a
// backlog is re-sent after DispatchTimeout, then after 2×, 4× … (capped),
// not every DispatchTimeout; two reconcilers racing at each step still send
// once.
func TestRelayBacksOffUnderBacklog(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		dt := ledger.DefaultDispatchTimeout
		task := create(t, b, "backlog")
		// Re-sends are due at dt, then 2dt, 4dt, 8dt later (the default cap is 8dt).
		gaps := []time.Duration{dt, 2 * dt, 4 * dt, 8 * dt, 8 * dt}
		sends := 0
		for i, gap := range gaps {
			b.clock.Advance(gap - time.Second)
			s := runTwice(t, b, nil)
			if got := s[0].Resent + s[1].Resent; got != 0 {
				t.Fatalf("step %d: re-sent %v before its backoff elapsed (%+v)", i, gap, s)
			}
			b.clock.Advance(2 * time.Second)
			s = runTwice(t, b, nil)
			if got := s[0].Resent + s[1].Resent; got != 1 {
				t.Fatalf("step %d: re-sent %d times after %v, want exactly 1 (%+v)", i, got, gap, s)
			}
			sends++
			got := get(t, b, task.TaskID)
			if got.Dispatches != sends || got.State != ledger.StateQueued {
				t.Fatalf("step %d: dispatches %d state %s", i, got.Dispatches, got.State)
			}
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != sends {
			t.Fatalf("queue holds %d messages, want %d re-sends", len(ids), sends)
		}
	})
}
