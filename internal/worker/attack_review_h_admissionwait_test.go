package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestAttackReviewHFreshTicketWaitLeavesTheNoCallUnknown (adversarial
// review h, commit bed7a43): the second no-call path that never reaches
// Handler.release's new fallback. Between the call-start mark and the call
// the worker re-admits (freshTicket) when its admission slot ended; when
// the model's window is full now, the task is put back to wait
// (waitAdmission → ledger.WaitAdmission, fenced on state = running). If
// the reconciler expired the lease to unknown at this very assignment in
// the meantime, WaitAdmission is refused (not_running) and waitAdmission
// acknowledges the record as "fenced": no call, no release, no
// ReleaseUnknown. The worker knows no call was made — yet the task stays
// unknown and, with a provider without readback, is parked
// unknown_outcome saying "its call ... was started".
//
// Sequence (lease 30 s, Grace 5 s, requests limit 1 per window, C = the
// claim): claim, admit (slot ends within 5 s), budget, the mark — its
// request hangs, answered at C+40 (its reply is not lost: the worker sees
// the mark applied). Meanwhile the reconciler finds the lease 10 s past
// its end with the call marked: unknown. freshTicket: the slot has ended,
// the old ticket is given back, other callers fill the window, the new
// admit is refused → WaitAdmission refused (unknown at this version) →
// ack(fenced).
func TestAttackReviewHFreshTicketWaitLeavesTheNoCallUnknown(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		b.h.CallTimeout = b.sim.CallTimeout()
		task := b.create(t, "h-fresh-wait", prompt)

		limits := map[string]admission.Limit{simulated.DefaultModel: {RequestsPerWindow: 1, TokensPerWindow: 10_000_000}}
		filler, err := admission.New(admission.Config{DB: e.DDB, TasksTable: e.Names.TasksTable, Now: b.clock.Now, Limits: limits})
		if err != nil {
			t.Fatal(err)
		}

		var (
			marked     atomic.Bool
			filled     atomic.Bool
			recSum     reconciler.Summary
			recErr     error
			recRan     bool
			fillAdmits int
			fillErr    error
		)
		inj := faultinject.New(nil)
		inj.OnResult = func(c faultinject.Call, params, result any, err error) {
			switch {
			case c.TaskID == task.TaskID && c.Key() == "DynamoDB.UpdateItem" && c.N == 2 && err == nil: // 1: claim, 2: the mark
				// The mark was applied; its request hung for 40 s (the
				// reply does arrive). Meanwhile the reconciler runs.
				b.clock.Advance(40 * time.Second)
				recSum, recErr = b.reconcileG(b.sim)
				recRan = true
				marked.Store(true)
			case admission.IsWindowKey(c.TaskID) && c.Key() == "DynamoDB.UpdateItem" && marked.Load() && !filled.Load():
				// freshTicket gave its old ticket back; other workers'
				// calls fill the window before its new admit.
				filled.Store(true)
				for range 10 {
					_, aerr := filler.Admit(ctx, simulated.DefaultModel, 100)
					var na *admission.NotAdmittedError
					if errors.As(aerr, &na) {
						return
					}
					if aerr != nil {
						fillErr = aerr
						return
					}
					fillAdmits++
				}
			}
		}
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		ddb := awsclient.DynamoDB(cfg)
		fl, err := ledger.New(ddb, b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		b.h.Ledger = fl
		a, err := admission.New(admission.Config{DB: ddb, TasksTable: e.Names.TasksTable, Now: b.clock.Now, Limits: limits})
		if err != nil {
			t.Fatal(err)
		}
		b.h.Admission = &worker.Admission{Admitter: a, Model: simulated.DefaultModel}

		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 120)
		first := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := b.h.Handle(ctx, ev); first <- resp }()
		await(t, first)

		if !recRan || recErr != nil || recSum.ExpiredToUnknown != 1 {
			t.Fatalf("setup: the reconciler did not expire the marked lease (ran %v, err %v, %+v)", recRan, recErr, recSum)
		}
		if !filled.Load() || fillErr != nil {
			t.Fatalf("setup: freshTicket's re-admission was not reached or the window not filled (filled %v, %d admits, err %v); logs:\n%s",
				filled.Load(), fillAdmits, fillErr, b.logs.String())
		}
		if logs := b.logs.String(); !strings.Contains(logs, "admission slot ended before the call") || !strings.Contains(logs, "not admitted") {
			t.Fatalf("setup: freshTicket did not re-admit and wait; logs:\n%s", logs)
		}
		select {
		case <-g.started:
			t.Fatal("setup: the provider was called")
		default:
		}
		if n := b.sim.SideEffects(task.TaskID); n != 0 {
			t.Fatalf("setup: %d side effects, want none", n)
		}

		got := b.get(t, task.TaskID)
		// Fixed: the worker gives the task back from unknown (uncalled).
		if got.State != ledger.StateQueued || got.ErrorClass != ledger.ErrorCallNotStarted || got.Attempts != 0 {
			t.Errorf("after the worker: %s, error %q, %d attempts; want queued, %s, the attempt given back", got.State, got.ErrorClass, got.Attempts, ledger.ErrorCallNotStarted)
		}
		if got.State == ledger.StateUnknown {
			b.clock.Advance(2 * time.Minute)
			b.reconcile(t, b.sim)
			got = b.get(t, task.TaskID)
		}
		if got.State == ledger.StateNeedsReview || got.State == ledger.StateUnknown {
			r, _ := b.l.GetReview(ctx, task.TaskID)
			var known string
			if r != nil {
				known = strings.Join(r.Known, " | ")
			}
			t.Fatalf("no provider call was ever made (0 side effects; the worker knew it: its re-admission was refused and its "+
				"admission wait fenced by the reconciler's expiry of its own assignment), yet the task ended %s (%s, error %q); review known: %s",
				got.State, got.ReviewReason, got.ErrorClass, known)
		}
	})
}
