package reconciler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Summary.WatchPending is "the watch items not read yet when the run
// ended ... in no LiveTasks count until adopted" ("submitted, not yet
// checked"). A caller that repeats its submit once the task's dispatch
// deadline passed, while the task is still queued and not indexed (its
// send was lost, or it is still running), gets a replay that keeps its own
// watch item, due a dispatch timeout after the repeat. The run that reads
// the task's first watch item adopts it into by_state (LiveTasks[active]),
// and the kept item, past the cursor, is still counted as pending: the one
// task is counted twice, as live and as submitted but not yet checked.
func TestWatchPendingDoesNotCountATaskAdoptedWhileItsReplaysWatchItemIsUnread(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setupShards(t, e, 1)
		task := create(t, b, "repeated-after-due") // its SQS send lost
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		_, err := b.l.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: "repeated-after-due", Kind: "generate",
			Input: `{"prompt":"hello repeated-after-due"}`, PayloadSHA256: "sha-repeated-after-due"})
		var dup *ledger.DuplicateError
		if !errors.As(err, &dup) || dup.Task.TaskID != task.TaskID {
			t.Fatalf("the caller's repeat = %v; want a replay of %s", err, task.TaskID)
		}
		s := handle(t, b.handler())
		if s.Adopted != 1 || s.LiveTasks[ledger.StateActive] != 1 {
			t.Fatalf("run: %+v; want the task adopted and counted live", s)
		}
		if s.WatchPending != 0 {
			t.Fatalf("watch pending = %d after the run adopted the one task submitted (live active %d; watch items %q): the adopted task is counted twice",
				s.WatchPending, s.LiveTasks[ledger.StateActive], e.WatchSKs(t, task.TaskID))
		}
	})
}
