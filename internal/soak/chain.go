package soak

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// regeneratesPerChain is how many regenerates of a chain_budget root are
// sent, at once, once the root is final.
const regeneratesPerChain = 2

// withRegenerates appends, for every chain_budget root, its planned
// regenerates: tasks of the same kind with the root as parent, keyed
// "<root key>-r<i>" (submitted by the root's caller, not on their own).
func withRegenerates(tasks []*task, scope string) []*task {
	out := tasks
	for _, t := range tasks {
		if t.kind != ChainBudget {
			continue
		}
		for i := range regeneratesPerChain {
			r := &task{i: len(out), kind: ChainBudget, input: t.input, parent: t, racing: t.racing}
			r.key = t.key + "-r" + strconv.Itoa(i+1)
			r.id = ledger.TaskID(scope, r.key)
			out = append(out, r)
		}
	}
	return out
}

// submitChain is the caller of a chain_budget root: it submits the root
// with the chain's budget, waits until the root is final, then sends the
// root's regenerates at once: they reserve on the same chain budget. A
// regenerate is planned as a task of its own; it is only ever submitted
// here.
func (s *soak) submitChain(ctx context.Context, t *task, rec *record) {
	if t.parent != nil {
		return // a regenerate: its root's caller sends it
	}
	if s.submitVariant(ctx, t, rec, "a", t.input).status != http.StatusAccepted {
		return
	}
	if !s.awaitFinal(ctx, t.id) {
		s.note(ChainBudget, "root "+t.id+" not final in time; no regenerates")
		return
	}
	s.inject(ChainBudget)
	var wg sync.WaitGroup
	for _, r := range s.tasks {
		if r.parent != t {
			continue
		}
		wg.Go(func() {
			rrec := s.records[r.id]
			var c call
			for try := range maxSubmitTries {
				c = s.request(ctx, http.MethodPost, "/tasks/"+t.id+"/regenerate", r.key, "")
				c.variant = "a"
				rrec.add(c)
				if c.status < 500 || !s.backoff(ctx, try) {
					break
				}
			}
			rrec.finish("a", r.input, c)
		})
	}
	wg.Wait()
}

// awaitFinal polls the task (clean reads) until it is final, for at most
// the age budget and a drain's margin.
func (s *soak) awaitFinal(ctx context.Context, id string) bool {
	deadline := time.Now().Add(s.cfg.MaxAge + 30*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if t, err := s.clean.Get(ctx, id); err == nil && !t.State.Live() {
			return true
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // polling the task: the ledger has no event for it
		}
	}
	return false
}
