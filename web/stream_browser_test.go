package web_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestBrowserStreamedReply: with the reply held by the test's stream gate
// at one word, then at another, the page shows it growing while the task
// runs (web/test/stream.mjs), then the saved result; the ledger holds that
// task completed.
func TestBrowserStreamedReply(t *testing.T) {
	t.Parallel()
	node := needBrowser(t)
	ctx := browserCtx(t)
	gate := newStreamGate()
	s := startStack(ctx, t, local.Options{
		Provider:   provider.Config{SimulatedStreamDelay: 20 * time.Millisecond, SimulatedStreamGate: gate.wait},
		StreamPoll: 100 * time.Millisecond,
	})
	var rep report
	runGatedScript(ctx, t, node, "stream.mjs", gate, &rep, s.URL, shotDir(t))
	checkScreenshots(t, rep.Screenshots, 2)
	id := rep.Tasks["streamed"]
	task, err := s.Ledger.Get(ctx, id)
	if err != nil {
		t.Fatalf("streamed task %q: %v", id, err)
	}
	if task.State != ledger.StateCompleted {
		t.Fatalf("streamed task %s is %s, want completed", id, task.State)
	}
}
