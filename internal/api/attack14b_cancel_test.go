package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestAttack14bCancelOfLapsedAttemptRefused (adversarial review of issue
// 14, round 2): a running task whose worker's lease lapsed is moved to
// unknown by the reconciler (ExpireToUnknown: the attempt's outcome is
// uncertain, nothing decided yet). The caller's cancel now gets 409
// state-conflict and records nothing — yet the task is not settled: the
// reconciler's readback that finds nothing re-queues it and the provider
// is called again, after the caller asked to stop. A moment earlier
// (running) the same cancel was a 202 that made "finds nothing" end it
// cancelled; the caller cannot tell the two apart. Smallest fix: in
// cancelRunning, also accept state unknown without cancel_version: one
// conditional UpdateItem (state = unknown AND assignment_version = read)
// bumping the fencing token and setting cancel_version = the lapsed
// version, so the unknown rules end it cancelled / completed / parked
// (never re-queued), answered 202 like a running cancel.
func TestAttack14bCancelOfLapsedAttemptRefused(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		resp := b.do(t, submitReq("atk14b-lapsed", body("p-atk14b-lapsed")))
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
