package ledger_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestParkReturnsTheItemAReadReturnsAtSubMillisecondTimes: Park returns
// the task as its update left it, without a read — the same task a
// consistent read returns. A real clock is not on whole milliseconds; the
// item keeps epoch ms only, so the returned task's derived timestamps must
// be those a read derives from it (a client comparing a park's view with
// a later GET must not see updated_at move).
func TestParkReturnsTheItemAReadReturnsAtSubMillisecondTimes(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "park-sub-ms")
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(1234567 * time.Nanosecond) // 1.234567 ms: the wall clock's resolution
		got, err := b.l.Park(ctx, c, ledger.ParkOptions{State: ledger.StateRunning, Version: c.AssignmentVersion},
			ledger.Review{Reason: ledger.ReviewProviderConfig, Summary: "s", ErrorClass: "permanent_config", ErrorMessage: "bad key"})
		if err != nil {
			t.Fatal(err)
		}
		read, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, read) {
			t.Fatalf("Park returned updated_at %q (updated_ms %d), a read of the item %q (%d)", got.UpdatedAt, got.UpdatedMs, read.UpdatedAt, read.UpdatedMs)
		}
	})
}
