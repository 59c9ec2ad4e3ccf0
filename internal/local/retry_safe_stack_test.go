package local_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/provider"
)

// make run with a provider that neither deduplicates nor reads back
// (PROVIDER_SIMULATED_MODE=plain): a cancel of a slow, running generation
// ends it cancelled within a heartbeat when generation is retry-safe (the
// default), where an effect would wait in unknown for the reconciler.
func TestStackCancelOfRunningRetrySafeGenerationEndsCancelled(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{StatusEvery: -1, Lease: 900 * time.Millisecond,
		Provider: provider.Config{SimulatedMode: provider.ModePlain}})
	v := b.submit(t, "local-cancel-retry-safe", `{"prompt":"Say hello slowly","simulate":"slow"}`)
	b.awaitState(t, v.TaskID, "running", 20*time.Second)
	b.cancel(t, v.TaskID)
	// One heartbeat is a third of the lease; the reconciler's settle time
	// and the call timeout are far longer than the wait allowed here.
	got := b.awaitState(t, v.TaskID, "cancelled", 10*time.Second)
	if got.Error == nil || got.Error.Class != "cancelled_while_running" {
		t.Fatalf("cancelled task error %+v, want cancelled_while_running", got.Error)
	}
}
