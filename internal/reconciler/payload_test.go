package reconciler_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// TestReadbackResultGoesThroughTheClaimCheck: with a payload store, a
// read-back result above DynamoDB's item limit is put at
// results/<task>/<created_ms>/<version> and the task completes with the
// reference (result_too_large is for when even that cannot happen).
func TestReadbackResultGoesThroughTheClaimCheck(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := unknownTask(t, b, "rb-claim", false)
		b.clock.Advance(time.Minute)
		h := b.handler()
		h.Provider = bigLooker{size: itemsize.MaxItemBytes}
		h.Payloads = e.Payloads(t, 0)
		s := handle(t, h)
		if s.Completed != 1 || s.Parked != 0 || s.ReadbackFound != 1 {
			t.Fatalf("summary %+v, want found and completed", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateCompleted || got.Result != "" || got.ResultRef == nil || got.ReadbackAt == "" ||
			got.ResultRef.Key != payload.ResultKey(task.TaskID, got.CreatedMs, got.AssignmentVersion) {
			t.Fatalf("task %s result %d bytes ref %+v readback %q", got.State, len(got.Result), got.ResultRef, got.ReadbackAt)
		}
		body, err := h.Payloads.Get(context.Background(), payload.Ref(*got.ResultRef))
		if err != nil || len(body) <= itemsize.MaxItemBytes {
			t.Fatalf("stored result %d bytes, %v", len(body), err)
		}
	})
}
