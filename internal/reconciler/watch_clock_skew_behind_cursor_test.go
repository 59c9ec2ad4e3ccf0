package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The protocol assumes the submitter's and the reconciler's clocks agree
// within a dispatch timeout (leases assume far closer agreement). Up to
// that skew a submitter's watch item sorts after the shard's cursor even
// when a run has just handled an item of the same shard due later by a
// correct clock, so a task whose send was lost is still found (DESIGN
// §1.1). Past it the item may sort behind the cursor and never be read.
func TestSubmitFromAClockBehindByLessThanADispatchTimeoutIsFoundBehindALaterItem(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setupShards(t, e, 1) // both tasks in the one shard
		skew := ledger.DefaultDispatchTimeout - 5*time.Second
		create(t, b, "correct-clock")
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
		task, err := submit.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: "skewed", Kind: "generate",
			Input: `{"prompt":"hello"}`, PayloadSHA256: "sha-skewed"})
		if err != nil {
			t.Fatalf("Create from a clock %s behind: %v", skew, err)
		}
		wantFound(t, b, e, task.TaskID, "submitted from a clock "+skew.String()+" behind, its SQS send lost")
	})
}
