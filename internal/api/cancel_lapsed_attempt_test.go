package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestCancelOfALapsedAttemptIsRecorded: a running task whose worker's
// lease lapsed is moved to unknown by the reconciler (ExpireToUnknown: the
// attempt's outcome is uncertain, nothing decided yet). The caller's
// cancel is accepted (202) and recorded (cancel_version = the lapsed
// version, the fencing token bumped), exactly like a cancel a moment
// earlier while running, so the unknown rules end the task cancelled /
// completed / parked — never re-queued. A 409 state-conflict that recorded
// nothing would let the reconciler's readback that finds nothing re-queue
// it and call the provider again, after the caller asked to stop.
func TestCancelOfALapsedAttemptIsRecorded(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		resp := b.do(t, submitReq("cancel-lapsed", body("p-cancel-lapsed")))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID
		c, err := b.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "slow-worker", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		// The reconciler, two minutes later: the lease has lapsed.
		later, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable,
			Now: func() time.Time { return time.Now().Add(2 * time.Minute) }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := later.ExpireToUnknown(ctx, id, c.AssignmentVersion); err != nil {
			t.Fatal(err)
		}
		resp = b.do(t, cancelReq(id))
		cur, err := b.l.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusConflict || cur.CancelVersion == 0 {
			t.Fatalf("cancel of a task whose attempt lapsed (unknown, not yet decided): status %d, cancel_version %d, state %s; want 202 and the cancel recorded so a readback that finds nothing ends it cancelled instead of re-queuing it (body %s)",
				resp.StatusCode, cur.CancelVersion, cur.State, resp.Body)
		}
	})
}
