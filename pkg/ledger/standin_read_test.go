package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRefusalReadIsCountedAsAStandInForTheOldItem: a refused claim needs
// the task as the refusal found it. DynamoDB returns it with the refusal
// (ALL_OLD); where an engine omits it the ledger reads it, and that read is
// counted apart from the design's own reads, so call budgets measure the
// design, not the emulator.
func TestRefusalReadIsCountedAsAStandInForTheOldItem(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "standin")
		if _, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		e.Counter.Reset()
		_, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: time.Minute})
		var nc *ledger.NotClaimableError
		if !errors.As(err, &nc) || nc.Task == nil || nc.Task.LeaseOwner != "w1" {
			t.Fatalf("second claim = %v, want refused with the task as w1 holds it", err)
		}
		calls := e.Counter.Calls()
		if n := calls["DynamoDB.GetItem"]; n != 0 {
			t.Errorf("%d GetItem counted as the design's own; the refusal's read is a stand-in", n)
		}
		if n := calls["DynamoDB.GetItem"+awsclient.StandIn]; n > 1 {
			t.Errorf("%d stand-in reads for one refusal, want at most 1", n)
		}
		t.Logf("%s: stand-in reads %d", e.Backend, calls["DynamoDB.GetItem"+awsclient.StandIn])
	})
}
