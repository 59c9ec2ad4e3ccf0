package e2e

import (
	"context"
	"testing"
	"time"

	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestDeliverCallThatMayStillRunIsNotResent: the worker bounds EVERY
// step's call — a delivery's too — with its provider's call timeout
// (PROVIDER_TIMEOUT; here 5m, both functions configured alike), while
// *deliver.Step declares no call timeout of its own (DefaultCallTimeout is
// 2m). A delivery whose call started (marked) under a lease that then
// lapsed may still be running 2m+ after the lease expired; if the
// reconciler trusted the destination's "not found" then and re-queued it,
// a second worker would send it again to a non-idempotent destination
// while the first call can still land: two deliveries of one operation id.
// So the reconciler waits out the longest bound, the provider's included.
func TestDeliverCallThatMayStillRunIsNotResent(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		s := newDeliverStack(t, e)
		prov := simulated.New(simulated.Options{Seed: 1, Clock: s.clock.Now, CallTimeout: 5 * time.Minute})
		s.w.Provider, s.rec.Provider = prov, prov
		notify := newSim(t, dsim.Notify, dsim.Options{Now: s.clock.Now})
		s.use(t, notify)
		id := s.submitDeliver(t, "deliver-call-in-flight", notifyInput)
		_ = receive(t, e, 0)

		// A worker claims it, marks the call start and sends; the call is in
		// flight (slow endpoint) while its heartbeats fail.
		c, err := s.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "w1", Lease: worker.DefaultLease})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.l.MarkCallStarted(ctx, id, c.AssignmentVersion, worker.DefaultLease); err != nil {
			t.Fatal(err)
		}
		callStart := s.clock.Now()
		workerBound := callStart.Add(5 * time.Minute) // the worker's call context ends here

		s.clock.Advance(worker.DefaultLease + time.Minute)
		s.reconcile(t) // expired lease, marked call → unknown
		s.clock.Advance(90 * time.Second)
		s.reconcile(t) // readback while the call may still run (reconcile adds Settle+1s)
		if !s.clock.Now().Before(workerBound) {
			t.Fatalf("test setup: %s is past the worker's call bound %s", s.clock.Now(), workerBound)
		}
		if got := s.task(t, id); got.State == ledger.StateQueued {
			t.Fatalf("at %s after the call start (the worker's call may run until %s) the delivery was re-queued on a 'not found' readback: a second send while the first call can still land",
				s.clock.Now().Sub(callStart), workerBound.Sub(callStart))
		}
	})
}
