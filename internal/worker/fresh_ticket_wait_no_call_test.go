package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRefusedAdmissionWaitGivesTheTaskBackAsNoCall: a no-call path that
// does not go through Handler.release. Between the call-start mark and the
// call the worker re-admits (freshTicket) when its admission slot ended;
// when the model's window is full now, the task is put back to wait
// (waitUntil → ledger.WaitAdmission, fenced on state = running). If the
// reconciler expired the lease to unknown at this very assignment in the
// meantime, WaitAdmission is refused (not_running). The worker knows no
// call was made, so the refused wait is handed to uncalled, which gives the
// task back — never left unknown to be parked unknown_outcome, with a
// provider without readback, saying "its call ... was started".
//
// Sequence (lease 30 s, Grace 5 s, requests limit 1 per window, C = the
// claim): claim, admit (slot ends within 5 s), budget, the mark — its
// request hangs, answered at C+40 (its reply is not lost: the worker sees
// the mark applied). Meanwhile the reconciler finds the lease 10 s past its
// end with the call marked: unknown. freshTicket: the slot has ended, the
// old ticket is given back, other callers fill the window, the new admit is
// refused → WaitAdmission refused (unknown at this version) → uncalled.
func TestRefusedAdmissionWaitGivesTheTaskBackAsNoCall(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		var (
			filled     atomic.Bool
			fillAdmits int
			fillErr    error
		)
		b := noCallAfterExpiry(t, e, "fresh-wait", false, func(b *bundle, task *ledger.Task, expire func(time.Duration)) {
			ctx := context.Background()
			limits := map[string]admission.Limit{simulated.DefaultModel: {RequestsPerWindow: 1, TokensPerWindow: 10_000_000}}
			filler, err := admission.New(admission.Config{DB: e.DDB, TasksTable: e.Names.TasksTable, Now: b.clock.Now, Limits: limits})
			if err != nil {
				t.Fatal(err)
			}
			var marked atomic.Bool
			inj := faultinject.New(nil)
			inj.OnResult = func(c faultinject.Call, params, result any, err error) {
				switch {
				case c.TaskID == task.TaskID && c.Key() == "DynamoDB.UpdateItem" && c.N == 2 && err == nil: // 1: claim, 2: the mark
					// The mark was applied; its request hung for 40 s (the
					// reply does arrive). Meanwhile the reconciler runs.
					expire(40 * time.Second)
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
		})
		if !filled.Load() || fillErr != nil {
			t.Fatalf("setup: freshTicket's re-admission was not reached or the window not filled (filled %v, %d admits, err %v)", filled.Load(), fillAdmits, fillErr)
		}
		if logs := b.logs.String(); !strings.Contains(logs, "admission slot ended before the call") || !strings.Contains(logs, "not admitted") {
			t.Fatalf("setup: freshTicket did not re-admit and wait; logs:\n%s", logs)
		}
	})
}
