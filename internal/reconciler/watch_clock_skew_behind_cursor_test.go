package reconciler_test

import (
	"slices"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// docs/protocol.md promises that a submitter whose clock is behind the
// reconciler's by up to a dispatch timeout and a half still has its task
// found. With a skew past one dispatch timeout (here 35 s of 30 s) the
// submitter's due_at is already behind the reconciler's clock when it
// puts the watch item, so the item sorts before the shard's cursor once
// a run has handled a later item of the same shard (any other task
// submitted a moment earlier by a correct clock): the watch Query reads
// only after the cursor, and the item is never read. Both puts are quick
// and succeed: the task is accepted, and with its SQS send lost it stays
// queued with no by_state entry and no message (DESIGN §1.1). The hold
// before an absent task cannot help: the item is never read at all.
func TestSubmitFromAClockBehindByMoreThanADispatchTimeoutIsNotLost(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setupShards(t, e, 1) // both tasks in the one shard
		const skew = 35 * time.Second
		other := create(t, b, "correct-clock")
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		if s := handle(t, b.handler()); s.Adopted != 1 {
			t.Fatalf("run at the correct-clock task's due time: %+v; want it adopted", s)
		}
		cfg := b.l.Config()
		cfg.Now = func() time.Time { return b.clock.Now().Add(-skew) }
		submit, err := ledger.New(e.DDB, cfg)
		if err != nil {
			t.Fatal(err)
		}
		task, err := submit.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: "skewed-35s", Kind: "generate",
			Input: `{"prompt":"hello"}`, PayloadSHA256: "sha-skewed-35s"})
		if err != nil {
			t.Fatalf("Create from a clock %s behind: %v", skew, err)
		}
		// Accepted, and its SQS send lost.
		for range 3 {
			b.clock.Advance(time.Minute)
			handle(t, b.handler())
		}
		ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL)
		got := get(t, b, task.TaskID)
		if !slices.Contains(ids, task.TaskID) && got.State == ledger.StateQueued && got.StateShard == "" {
			t.Fatalf("accepted task %s lost: queued, unindexed, watch items %q behind the cursor (the earlier task %s was due %s later), no message after three runs (queue: %v)",
				task.TaskID, e.WatchSKs(t, task.TaskID), other.TaskID, time.Duration(other.DueAt-task.DueAt)*time.Millisecond, ids)
		}
	})
}
