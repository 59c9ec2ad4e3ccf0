package api_test

import (
	"net/http"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
)

// DESIGN §1.2: the same key with a different payload "is rejected with
// 422 and writes nothing". A watch item is a write that outlives the
// request by 14 days: the reconciler reads it and the task it names
// (one consistent read each), and the overview and the WatchPending
// metric count it as a submission not yet checked until then — a refused
// request, not a submission. A replay (200) is the existing task and
// submits nothing either. So neither may leave a watch item beside the
// one the accepted submit put.
func TestKeyReuseAndReplayLeaveNoWatchItem(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		resp := b.do(t, submitReq("watch-reuse", body("first payload")))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID
		if n := len(e.WatchSKs(t, id)); n != 1 {
			t.Fatalf("accepted submit left %d watch items, want 1", n)
		}

		wantProblem(t, b.do(t, submitReq("watch-reuse", body("another payload"))), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
		afterReuse := len(e.WatchSKs(t, id))

		wantStatus(t, b.do(t, submitReq("watch-reuse", body("first payload"))), http.StatusOK)
		afterReplay := len(e.WatchSKs(t, id))

		if afterReuse != 1 || afterReplay != 1 {
			t.Fatalf("watch items naming %s: %d after the 422 key reuse, %d after the 200 replay; want 1 each (only the accepted submit's)",
				id, afterReuse, afterReplay)
		}
	})
}
