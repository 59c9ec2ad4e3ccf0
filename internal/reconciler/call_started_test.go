package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestExpiredLeaseWithoutCallMarkIsRequeued: with a provider that neither
// deduplicates nor reads back, an expired lease with no call-start mark at
// its version means the worker died after its claim and before its call:
// the task is re-queued and re-sent like a step without side effects, not
// moved to unknown (which would end parked unknown_outcome).
func TestExpiredLeaseWithoutCallMarkIsRequeued(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		task := create(t, b, "claim-only")
		c := claim(t, b, task.TaskID)
		// An earlier assignment's mark does not count for this one.
		if _, err := b.l.MarkCallStarted(ctx, c.TaskID, c.AssignmentVersion, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Release(ctx, c.TaskID, c.AssignmentVersion); err != nil {
			t.Fatal(err)
		}
		c = claim(t, b, task.TaskID)
		b.clock.Advance(time.Minute)
		s := handle(t, b.handler())
		if s.Requeued != 1 || s.ExpiredToUnknown != 0 || s.Parked != 0 {
			t.Fatalf("summary = %+v, want the unmarked expired lease re-queued", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateQueued || got.Attempts != c.Attempts {
			t.Fatalf("task %s attempts %d, want queued with %d attempts", got.State, got.Attempts, c.Attempts)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 || ids[0] != task.TaskID {
			t.Fatalf("queue holds %v, want the task re-sent once", ids)
		}
	})
}

// TestExpiredLastLeaseWithoutCallMarkIsParkedNoCall: the same on the last
// attempt parks budget_exhausted, and the review says no provider call was
// started rather than that the provider may have acted.
func TestExpiredLastLeaseWithoutCallMarkIsParkedNoCall(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		task := create(t, b, "claim-only-last", func(n *ledger.NewTask) { n.MaxAttempts = 1 })
		claim(t, b, task.TaskID)
		b.clock.Advance(time.Minute)
		s := handle(t, b.handler())
		if s.Parked != 1 || s.ExpiredToUnknown != 0 || s.Requeued != 0 {
			t.Fatalf("summary = %+v, want parked in this run", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted {
			t.Fatalf("task %s/%s, want needs_review/budget_exhausted", got.State, got.ReviewReason)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		text := r.Summary + "\n" + strings.Join(r.Known, "\n") + "\n" + strings.Join(r.Uncertain, "\n") + "\n" + strings.Join(r.SafeActions, "\n")
		if !strings.Contains(text, "no provider call was started under assignment 1") || strings.Contains(text, "may have") {
			t.Fatalf("review does not say that no call was started (or still says the provider may have acted):\n%s", text)
		}
	})
}

// TestReadbackProviderIsMarkedToo: a provider that reads back but does not
// deduplicate gets the call-start mark as well. An expired lease without it
// is re-queued without a readback (no call was started); with it the lease
// goes to unknown for readback.
func TestReadbackProviderIsMarkedToo(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true})
		unmarked := create(t, b, "claim-only-readback")
		claim(t, b, unmarked.TaskID)
		marked := create(t, b, "claim-and-call-readback")
		markCall(t, b, claim(t, b, marked.TaskID))
		b.clock.Advance(time.Minute)
		if s := handle(t, b.handler()); s.ExpiredToUnknown != 1 || s.Requeued != 1 {
			t.Fatalf("summary = %+v, want the unmarked lease re-queued and the marked one moved to unknown", s)
		}
		if got := get(t, b, unmarked.TaskID); got.State != ledger.StateQueued {
			t.Fatalf("unmarked task %s, want queued", got.State)
		}
		if got := get(t, b, marked.TaskID); got.State != ledger.StateUnknown {
			t.Fatalf("marked task %s, want unknown", got.State)
		}
	})
}
