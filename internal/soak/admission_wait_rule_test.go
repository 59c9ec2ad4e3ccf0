package soak

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestAdmissionWaitRuleExcusesOnlyAttemptsTheReconcilerTookBack: an
// admission wait gives its claim's attempt back, so the task's first
// provider call carries the attempt of the claim that waited. An expired
// lease re-queued by the reconciler keeps its attempt consumed (the
// reconciler logs the attempts of the assignment it took back), so each
// such re-queue between the waited claim and the first call explains one
// attempt more, and nothing else does: a wait that consumed its attempt
// must be seen whether or not some other lease of the task expired — a
// later assignment's, or one after the first call.
func TestAdmissionWaitRuleExcusesOnlyAttemptsTheReconcilerTookBack(t *testing.T) {
	t.Parallel()
	const claim = 1 // the attempts of the claim that waited
	cases := []struct {
		name      string
		requeued  []int // attempts logged by the reconciler's expired-lease re-queues
		firstCall int   // the attempt of the task's first provider call
		want      bool  // admission_wait_consumed_attempt reported
	}{
		{"the wait gave its attempt back", nil, 1, false},
		{"the wait consumed its attempt", nil, 2, true},
		{"the waited claim's own lease expired (its give-back never landed)", []int{1}, 2, false},
		{"the claim after a wait that gave back expired before its call", []int{1}, 2, false},
		{"two expired leases in a row", []int{1, 2}, 3, false},
		{"the wait consumed its attempt, then a later claim's lease expired", []int{2}, 3, true},
		{"the wait consumed its attempt, the first call's lease expired afterwards", []int{2}, 2, true},
		{"the wait gave back, a lease expired after the first call", []int{1}, 1, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			id := "t_admission_wait_" + string(rune('a'+i))
			prov := simulated.New(simulated.Options{})
			s := &soak{prov: prov, byID: map[string]*task{}, injected: map[Kind]int{}}
			s.sp = spendState{waitClaim: map[string]int{}, waited: map[string]int{}, touched: map[string]int{}, expired: map[string]map[int]bool{}}
			s.log = slog.New(&watchLog{inner: logging.Discard().Handler(), seen: s.onWatched})
			tk := &task{id: id, kind: AdmissionWait}
			s.byID[id] = tk

			// What the run records: the claim's attempts (afterClaim), the
			// worker's wait, the reconciler's re-queues (its own attrs,
			// internal/reconciler/rules.go), then the provider's calls.
			s.sp.waitClaim[id] = claim
			s.log.With("task_id", id, "version", int64(1)).Info("not admitted: the model's window is full; waiting without consuming an attempt")
			for j, a := range c.requeued {
				s.log.With("task_id", id, "version", int64(2+2*j), "attempts", a, "lease_owner", "w").
					Info("reconciler: expired lease re-queued; no provider call was started under it")
			}
			if _, err := prov.Generate(context.Background(), contract.Request{OperationID: id, Attempt: c.firstCall, Input: json.RawMessage(`{"prompt":"hello"}`)}); err != nil {
				t.Fatal(err)
			}

			ch := &checker{s: s, rows: map[Kind]*Row{}}
			ch.spendTask(context.Background(), tk, &ledger.Task{TaskID: id, State: ledger.StateCompleted, Attempts: c.firstCall}, nil)
			got := false
			for _, v := range ch.violations {
				got = got || v.Rule == "admission_wait_consumed_attempt"
			}
			if got != c.want {
				t.Errorf("re-queues at attempts %v, first call at attempt %d (waited claim %d): admission_wait_consumed_attempt reported %t, want %t; violations: %v",
					c.requeued, c.firstCall, claim, got, c.want, ch.violations)
			}
		})
	}
}
