package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestFreshTicketNeverStartsTheCallAfterItsLease: MarkCallStarted promises
// "after the mark the lease runs at least lease/2 more", because the
// reconciler trusts a readback's "not found" for a marked call once the
// lease end plus the call timeout has passed — "so the lease must not end
// before the call starts". The worker runs freshTicket BETWEEN the mark and
// the call: when the admission slot ended meanwhile it gives the old ticket
// back and admits again (two DynamoDB writes, no heartbeat). Lost replies
// there (each a request that hangs until its timeout; modelled as 17.5 s of
// the ledger's clock) let the lease end and the reconciler expire it to
// unknown before the call has even been sent (W+41.4 s). Were the worker to
// make the call anyway (W+51.4 s), the call could run until W+111.4 s,
// while callMayRun's trust window (from the expiry plus the call timeout)
// ends at W+101.4 s: a readback's "not found" would be trusted, the task
// re-queued, and a second worker would call the non-idempotent provider
// while the first call is in flight — two side effects. So a marked call
// starts only inside its lease (worker leaseForCall).
//
// Provider: NoIdempotency (the readback rule needs Lookup).
func TestFreshTicketNeverStartsTheCallAfterItsLease(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		g.ignoreCtx = true // a request the provider has received goes on
		b.h.Provider = g
		b.h.CallTimeout = b.sim.CallTimeout() // one minute, as the reconciler reads it
		w := time.Unix(b.clock.Now().Unix()/60*60+60, 0)
		b.clock.Set(w.Add(4900 * time.Millisecond)) // slot 0 ends at W+5 s
		task := b.create(t, "fresh-ticket", prompt)

		hung := make(chan struct{})
		resume := make(chan struct{})
		var marked atomic.Bool
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			switch {
			case c.TaskID == task.TaskID && c.Key() == "DynamoDB.UpdateItem" && c.N == 2: // 1: claim, 2: the mark
				return faultinject.Throttle
			case admission.IsWindowKey(c.TaskID) && marked.Load() && c.Key() == "DynamoDB.UpdateItem" && (c.N == 2 || c.N == 3):
				// 1: the first admit; 2: freshTicket's release; 3: its new admit.
				return faultinject.LostReply
			}
			return ""
		}))
		inj.OnInject = func(c faultinject.Call, k faultinject.Kind) {
			switch {
			case c.TaskID == task.TaskID:
				b.clock.Advance(1500 * time.Millisecond) // the throttle and save's backoff
				marked.Store(true)
			case admission.IsWindowKey(c.TaskID):
				b.clock.Advance(17500 * time.Millisecond) // a request that hung until its timeout
				if c.N == 3 {
					// The reconciler runs while this request hangs; it
					// times out 10 s later.
					hung <- struct{}{}
					<-resume
					b.clock.Advance(10 * time.Second)
				}
			}
		}
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		ddb := awsclient.DynamoDB(cfg)
		l, err := ledger.New(ddb, b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		b.h.Ledger = l
		a, err := admission.New(admission.Config{
			DB: ddb, TasksTable: e.Names.TasksTable, Now: b.clock.Now,
			Limits: map[string]admission.Limit{simulated.DefaultModel: {RequestsPerWindow: 100, TokensPerWindow: 10_000_000}},
		})
		if err != nil {
			t.Fatal(err)
		}
		b.h.Admission = &worker.Admission{Admitter: a, Model: simulated.DefaultModel}

		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 120)
		first := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); first <- resp }()

		select {
		case <-hung:
		case <-time.After(hangBound):
			t.Fatal("setup: freshTicket's admit was not reached")
		}
		marked1 := b.get(t, task.TaskID)
		if marked1.CallStartedVersion != marked1.AssignmentVersion {
			t.Fatalf("setup: no call-start mark (mark %d, version %d)", marked1.CallStartedVersion, marked1.AssignmentVersion)
		}
		leaseEnd := time.UnixMilli(marked1.LeaseUntil)
		// The reconciler runs while the admission request hangs: the
		// lease ended more than Grace ago, the call is marked: unknown.
		s := b.reconcile(t, b.sim)
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateUnknown {
			t.Fatalf("setup: reconciler %+v left the task %s, want unknown", s, got.State)
		}
		close(resume)
		// leaseForCall: the lease ran out between the mark and the
		// call, its renewal is refused (the task is unknown at this
		// version), and the provider is not called.
		await(t, first)
		inj.SetEnabled(false) // no more faults: the rest is the ordinary flow
		select {
		case <-g.started:
			t.Fatalf("the provider was called at W+%s though the lease had ended at W+%s (the task went unknown meanwhile)", b.clock.Now().Sub(w), leaseEnd.Sub(w))
		default:
		}
		// No call was made under the assignment, and the worker knows it:
		// it gives the task back from unknown (rather than leave
		// it for a readback after the trust window), and it runs once.
		cur := b.get(t, task.TaskID)
		if cur.State != ledger.StateQueued || cur.ErrorClass != ledger.ErrorCallNotStarted || cur.Attempts != marked1.Attempts-1 {
			t.Fatalf("after the call that was never made: %s, error %q, %d attempts; want queued, %s, the attempt given back (%d)",
				cur.State, cur.ErrorClass, cur.Attempts, ledger.ErrorCallNotStarted, marked1.Attempts-1)
		}
		close(g.release)
		b.run(t, task.TaskID)
		if got := b.get(t, task.TaskID); got.State != ledger.StateCompleted || b.sim.SideEffects(task.TaskID) != 1 {
			t.Fatalf("the task ended %s with %d side effects; want completed with 1", got.State, b.sim.SideEffects(task.TaskID))
		}
	})
}
