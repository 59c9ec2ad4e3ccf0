package soak

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
)

// TestCallCutIsCountedWhateverTheContextCause: call_cut_by_deadline exists
// to prove the worker's admission ("the worker admits a call only with time
// for it"), so it must not trust the label the worker under test puts on
// its own context (counting a call only when context.Cause is
// DeadlineExceeded). A worker regression that "fixes" admission by
// shrinking the call's timeout to the time left
// (context.WithTimeoutCause(work, min(callTimeout, left), errCallTimeout))
// starts calls that cannot finish and has them cut short by what is in
// effect the invocation's deadline; the soak must count them. Here a call
// is started with 30 ms of its context left while the provider declares a
// 2 s call timeout; it is cut after 30 ms, and the check must see it.
func TestCallCutIsCountedWhateverTheContextCause(t *testing.T) {
	const callTimeout = 2 * time.Second
	prov := simulated.New(simulated.Options{LongDelay: 10 * time.Second, CallTimeout: time.Minute})
	s := &soak{cfg: Config{CallTimeout: callTimeout}, prov: prov, cut: map[string]int{}, byID: map[string]*task{}}
	p := &countingProvider{Provider: prov, s: s}

	const id = "t_cut_with_own_cause"
	prov.Script(id, simulated.Long)
	// What a clamping worker hands the provider: the invocation has 30 ms
	// left (less its margin), and the call context says "call timeout".
	errCallTimeout := errors.New("worker: provider call timeout")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 30*time.Millisecond, errCallTimeout)
	defer cancel()
	start := time.Now()
	_, err := p.Generate(ctx, contract.Request{OperationID: id, Attempt: 1, Input: json.RawMessage(`{"prompt":"hello"}`)})
	if err == nil {
		t.Fatal("the call was not cut short")
	}
	if took := time.Since(start); took >= callTimeout {
		t.Fatalf("the call ran %s, its full timeout: nothing was cut", took)
	}
	if s.cut[id] == 0 {
		t.Fatalf("a call started with %s of its context left (provider call timeout %s) and cut short after %s is not counted as call_cut_by_deadline",
			30*time.Millisecond, callTimeout, time.Since(start).Round(time.Millisecond))
	}
}
