package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestLateRenewalNeverStartsTheCallAfterItsLease: leaseForCall promises "a
// marked call starts only inside its lease" — when under lease/3 is left
// after the call-start mark it renews first, and it checks the lease that
// renewal left before calling, not only that the renewal returned without
// an error. A renewal's lease end is computed when the request is built
// (now + lease); when the answer comes back late — here its reply is lost
// (17.5 s, a request that hung until its timeout), the ownWrite read that
// recognises it is lost too (17.5 s), and the second read's reply takes
// 3 s — the renewed lease has already ended (by the worker's own clock)
// when the worker would call. Sequence (lease 30 s, Grace 5 s, call timeout
// 60 s, C = the claim):
//
//	C+0     claim, lease to C+30; the mark (reply lost) and its first read
//	        (reply lost): C+35, under lease/3 left → leaseForCall renews
//	C+35    Renew applied: lease_until = C+65 (due_at C+65); reply lost
//	C+52.5  first ownWrite read lost
//	C+70    second read served (running, our nonce); its reply is slow:
//	C+71    the reconciler finds the lease 6 s past C+65 (> Grace): the call
//	        is marked, so the task goes unknown; its trust window for a
//	        readback's "not found" ends at C+71 + 60 s = C+131
//	C+73    the read's reply arrives: "renewal applied", but the renewed
//	        lease ended 8 s ago. A call now could run until C+133, and at
//	C+132   a readback's "not found" (the call still in flight) would be
//	        trusted → re-queued → a second worker calls the non-idempotent
//	        provider → the first call lands too: two side effects for one
//	        attempt whose outcome was uncertain (DESIGN §1.4).
func TestLateRenewalNeverStartsTheCallAfterItsLease(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		g.ignoreCtx = true // a request the provider has received goes on
		b.h.Provider = g
		b.h.CallTimeout = b.sim.CallTimeout() // one minute, as the reconciler reads it
		ct := b.sim.CallTimeout()
		// C ≡ 25 s (mod 30 s): the renewal's lease end C+65 is a whole
		// number of leases, so its due_at is the lease end itself.
		c0 := time.UnixMilli((b.clock.Now().UnixMilli()/30000+1)*30000 + 25000)
		b.clock.Set(c0)
		task := b.create(t, "late-renewal", prompt)

		var (
			mu        sync.Mutex
			renewed   *ledger.Task // the item the renewal's recognising read returned
			expiredAt time.Time
			recSum    reconciler.Summary
			recErr    error
			recRan    bool
		)
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.TaskID != task.TaskID {
				return ""
			}
			switch {
			case c.Key() == "DynamoDB.UpdateItem" && (c.N == 2 || c.N == 3): // 1: claim, 2: the mark, 3: leaseForCall's Renew
				return faultinject.LostReply
			case c.Key() == "DynamoDB.GetItem" && (c.N == 1 || c.N == 3): // each write's first ownWrite read
				return faultinject.LostReply
			}
			return ""
		})
		inj.OnInject = func(c faultinject.Call, k faultinject.Kind) {
			if c.TaskID == task.TaskID && k == faultinject.LostReply {
				b.clock.Advance(17500 * time.Millisecond) // a request that hung until its timeout
			}
		}
		inj.OnResult = func(c faultinject.Call, params, result any, err error) {
			if c.TaskID != task.TaskID || c.Key() != "DynamoDB.GetItem" || c.N != 4 || err != nil {
				return
			}
			// The renewal's second recognising read was served; its reply
			// is slow. Meanwhile the reconciler runs.
			out, _ := result.(*dynamodb.GetItemOutput)
			mu.Lock()
			defer mu.Unlock()
			if out != nil {
				var tk ledger.Task
				if derr := attributevalue.UnmarshalMap(out.Item, &tk); derr == nil {
					renewed = &tk
				}
			}
			b.clock.Advance(time.Second)
			expiredAt = b.clock.Now()
			recSum, recErr = b.reconcileG(b.sim)
			recRan = true
			b.clock.Advance(2 * time.Second)
		}

		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 120)
		first := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); first <- resp }()

		var called bool
		select {
		case <-g.started:
			called = true
		case <-first:
		case <-time.After(60 * time.Second):
			t.Fatal("the worker neither called the provider nor returned")
		}
		mu.Lock()
		ran, sum, rerr, rn, exp := recRan, recSum, recErr, renewed, expiredAt
		mu.Unlock()
		if !ran {
			t.Fatalf("setup: the renewal's recognising read was not reached (called=%v); faults %v", called, inj.Injected())
		}
		if rerr != nil {
			t.Fatalf("setup: reconciler: %v (%+v)", rerr, sum)
		}
		if sum.ExpiredToUnknown != 1 {
			t.Fatalf("setup: the reconciler at C+71 did not expire the lease to unknown: %+v", sum)
		}
		if rn == nil || rn.State != ledger.StateRunning || rn.LeaseUntil != c0.Add(65*time.Second).UnixMilli() {
			t.Fatalf("setup: the renewal's read did not show the renewed running task (%+v)", rn)
		}
		if !called {
			// The code held: no call after the lease ended. The task must
			// still end, once, with one side effect.
			inj.SetEnabled(false)
			cur := b.get(t, task.TaskID)
			if cur.State == ledger.StateUnknown {
				b.clock.Set(time.UnixMilli(cur.DueAt).Add(ct + time.Second))
				b.reconcile(t, b.sim)
			}
			if cur = b.get(t, task.TaskID); cur.State == ledger.StateQueued || cur.State == ledger.StateRetryWait {
				if nb := time.UnixMilli(cur.NotBefore); nb.After(b.clock.Now()) {
					b.clock.Set(nb)
				}
				h2 := b.handler(b.l, b.sim)
				h2.CallTimeout = ct
				b.send(t, task.TaskID)
				handle(t, h2, ctx, b.deliver(t, 1, 60))
			}
			if got := b.get(t, task.TaskID); got.State != ledger.StateCompleted || b.sim.SideEffects(task.TaskID) != 1 {
				t.Fatalf("the task ended %s with %d side effects; want completed with 1", got.State, b.sim.SideEffects(task.TaskID))
			}
			return
		}
		callStart := b.clock.Now()
		leaseEnd := time.UnixMilli(rn.LeaseUntil)
		t.Logf("the provider was called at C+%s; the renewal left the lease to end at C+%s; the reconciler expired it at C+%s",
			callStart.Sub(c0), leaseEnd.Sub(c0), exp.Sub(c0))
		inj.SetEnabled(false)

		cur := b.get(t, task.TaskID)
		if cur.State != ledger.StateUnknown {
			t.Fatalf("setup: task %s, want unknown (expired before the call)", cur.State)
		}
		// The reconciler's trust window for the marked call ends at the
		// expiry plus the call timeout; the call started after the expiry,
		// so it may still run for a while after that.
		readback := time.UnixMilli(cur.DueAt).Add(ct + time.Second)
		if !readback.Before(callStart.Add(ct)) {
			t.Fatalf("setup: readback at C+%s is not inside the call's time (started C+%s)", readback.Sub(c0), callStart.Sub(c0))
		}
		b.clock.Set(readback)
		s := b.reconcile(t, b.sim)
		if s.Requeued == 1 {
			// A second worker picks the re-queued task up.
			h2 := b.handler(b.l, b.sim)
			h2.CallTimeout = ct
			handle(t, h2, ctx, b.deliver(t, 1, 60))
		}
		close(g.release) // the first call, sent while the task was unknown, lands
		await(t, first)

		if n := b.sim.SideEffects(task.TaskID); n > 1 {
			got := b.get(t, task.TaskID)
			t.Fatalf("the non-idempotent provider acted %d times for one task (final state %s): the worker started its call at C+%s, "+
				"after the lease its renewal left had ended (C+%s) and after the reconciler expired it (C+%s); the readback's "+
				"\"not found\" at C+%s was trusted (window from the expiry) while that call was still in flight, and the task was re-queued",
				n, got.State, callStart.Sub(c0), leaseEnd.Sub(c0), exp.Sub(c0), readback.Sub(c0))
		}
	})
}
