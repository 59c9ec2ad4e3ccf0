package reconciler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A submitter whose clock is behind the reconciler's by more than half
// the dispatch timeout (here 21 s of 30 s) chooses a due_at the
// reconciler's clock reaches while the submit is still between its two
// puts, though the submit is well inside its own bound (10 s of its 15).
// The run reads the watch item, finds no task yet, and moves its cursor
// past it; the task put then lands, unindexed, and with its SQS send lost
// nothing finds it. By_state entries put with the task (the design before
// the watch table) tolerated any skew: a skewed reconciler only re-sent
// early or late.
func TestSubmitFromAClockBehindTheReconcilersIsNotLost(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		const skew = 21 * time.Second
		cfg := b.l.Config()
		cfg.Now = func() time.Time { return b.clock.Now().Add(-skew) }
		slow := &slowWatchPut{DynamoDB: e.DDB, table: e.Names.WatchTable}
		submit, err := ledger.New(slow, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var watched, adopted int
		slow.during = func() {
			b.clock.Advance(10 * time.Second) // the submitter: 10 s into its 15 s bound
			s := handle(t, b.handler())
			watched, adopted = s.Watched, s.Adopted
		}
		task, err := submit.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: "skewed-submit", Kind: "generate",
			Input: `{"prompt":"hello"}`, PayloadSHA256: "sha-skewed"})
		if err != nil {
			if _, gerr := b.l.Get(ctx, b.l.TaskID("alice", "skewed-submit")); gerr == nil {
				t.Fatalf("Create failed (%v) but left its task behind", err)
			}
			return // refused: not accepted
		}
		// Accepted, and its SQS send lost.
		wantFound(t, b, e, task.TaskID, fmt.Sprintf("the run between the submit's puts: watched %d, adopted %d", watched, adopted))
	})
}
