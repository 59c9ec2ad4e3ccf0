package local_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/internal/provider/contract"
)

// A reply held mid-stream by the simulated provider's stream gate (as the
// browser tests hold one) and then cancelled ends the task cancelled with
// no saved result: the gate ends with the call's context, and the cut
// stream is never taken for a reply.
func TestStackCancelOfAReplyHeldMidStreamEndsCancelled(t *testing.T) {
	t.Parallel()
	held := make(chan struct{}, 1)
	gate := func(ctx context.Context, _ contract.GenerateInput, chunk int) error {
		if chunk < 2 {
			return nil
		}
		select {
		case held <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}
	b := setupStack(t, local.Options{StatusEvery: -1, Lease: 900 * time.Millisecond, StreamPoll: 100 * time.Millisecond,
		Provider: provider.Config{SimulatedStreamGate: gate}})
	v := b.submit(t, "local-cancel-held-stream", `{"prompt":"Hold me mid-stream"}`)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the reply never reached the gate's word: the worker did not stream it")
	}
	b.cancel(t, v.TaskID)
	b.awaitState(t, v.TaskID, "cancelled", 10*time.Second)
	task, err := b.st.Ledger.Get(t.Context(), v.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if task.Result != "" || task.ResultRef != nil {
		t.Fatalf("cancelled task holds a result: %q %+v", task.Result, task.ResultRef)
	}
}
