package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// failOnceLookup is a provider whose first readback fails (a transient
// outage of its lookup) and whose later readbacks are the simulated
// provider's.
type failOnceLookup struct {
	*simulated.Provider
	failed *atomic.Bool
}

func (p failOnceLookup) Lookup(ctx context.Context, op string) (contract.Result, error) {
	if p.failed.CompareAndSwap(false, true) {
		return contract.Result{}, errors.New("lookup: 503 service unavailable")
	}
	return p.Provider.Lookup(ctx, op)
}

// TestParkAfterADeferredReadbackDatesTheUncertaintyWhenItBegan: DESIGN
// §1.6 — a review tells "what is known, what is uncertain". A worker's
// lease lapsed during a marked call to a provider without idempotency
// keys (the reconciler moved the task to unknown); a first readback
// failed and was deferred; past the age budget the next readback finds
// nothing while the lapsed call may still run, and the task is parked
// budget_exhausted. The review's uncertainty names the time around which
// the provider may have produced a result: when the outcome became
// uncertain, not when the reconciler deferred its readback.
//
// Sequence (MaxAge 3 min, call timeout 5 min): claim and mark the call at
// c; c+40 s run 1 expires the lease to unknown; c+100 s run 2, readback
// fails (deferred); c+181 s run 3, past the age deadline, readback "not
// found" with the call possibly still running → park.
func TestParkAfterADeferredReadbackDatesTheUncertaintyWhenItBegan(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setupShards(t, e, 1, simulated.Options{NoIdempotency: true, CallTimeout: 5 * time.Minute})
		start := b.clock.Now()
		task := create(t, b, "deferred-review-time", func(n *ledger.NewTask) { n.MaxAge = 3 * time.Minute })
		markCall(t, b, claim(t, b, task.TaskID))
		h := b.handler()
		h.Provider = failOnceLookup{Provider: b.prov, failed: &atomic.Bool{}}

		b.clock.Set(start.Add(40 * time.Second)) // lease (30 s) and Grace over
		if s := handle(t, h); s.ExpiredToUnknown != 1 {
			t.Fatalf("setup: run 1 %+v; want the lease expired to unknown", s)
		}
		since := get(t, b, task.TaskID).UnknownSince()

		b.clock.Set(start.Add(100 * time.Second)) // Settle over: the readback fails
		if s := handle(t, h); s.ReadbackErrors != 1 {
			t.Fatalf("setup: run 2 %+v; want one failed readback", s)
		}
		deferred := get(t, b, task.TaskID)
		if deferred.State != ledger.StateUnknown || !deferred.UnknownSince().Equal(since) {
			t.Fatalf("setup: after the failed readback the task is %s, uncertain since %v; want unknown since %v",
				deferred.State, deferred.UnknownSince(), since)
		}

		b.clock.Set(time.UnixMilli(task.DeadlineMs).Add(time.Second))
		s := handle(t, h)
		got := get(t, b, task.TaskID)
		r, err := b.l.GetReview(ctx, task.TaskID)
		if got.State != ledger.StateNeedsReview || err != nil || r == nil {
			t.Fatalf("setup: task %s after run 3 (%+v), review %v; want parked", got.State, s, err)
		}
		uncertain := strings.Join(r.Uncertain, "\n")
		if want := since.UTC().Format(time.RFC3339); !strings.Contains(uncertain, want) {
			t.Fatalf("the outcome became uncertain at %s (the readback was deferred at %s), yet the review (%s) says what is uncertain as:\n%s",
				want, time.UnixMilli(deferred.UpdatedMs).UTC().Format(time.RFC3339), r.Reason, uncertain)
		}
	})
}
