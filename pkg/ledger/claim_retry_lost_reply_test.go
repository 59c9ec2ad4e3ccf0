package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// A due retry_wait task is claimed in two writes (the refused claim, then
// claim_retry); the second's reply lost, either way, is still recognised
// as this caller's claim by its nonce: one attempt, running, indexed in
// active.
func TestClaimRetryRecognisesItsOwnWriteAfterALostReply(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := mustCreate(t, b, "claim-retry-lost-"+mode)
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.ScheduleRetry(ctx, task.TaskID, c.AssignmentVersion, b.clock.Now().Add(time.Second), "throttled", "429"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(2 * time.Second)
		l, lost := loseNth(t, b, mode, "UpdateItem", 2)
		got, err := l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("claim_retry after a lost reply = %v; want the task this claim took", err)
		}
		cur, _ := b.l.Get(ctx, task.TaskID)
		if got.AssignmentVersion != 2 || cur.State != ledger.StateRunning || cur.Attempts != 2 || cur.StateShard != b.l.StateShard(ledger.StateRunning, task.TaskID) {
			t.Fatalf("after a lost claim_retry reply: got v%d; stored %s attempts %d shard %q", got.AssignmentVersion, cur.State, cur.Attempts, cur.StateShard)
		}
	})
}
