package web_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestBrowserStreamedReply: on a stack whose simulated provider streams a
// word every 150 ms, the page shows the reply growing while the task runs
// (web/test/stream.mjs), then the saved result; the ledger holds that task
// completed.
func TestBrowserStreamedReply(t *testing.T) {
	t.Parallel()
	node := needBrowser(t)
	ctx := browserCtx(t)
	s := startStack(ctx, t, local.Options{
		Provider:   provider.Config{SimulatedStreamDelay: 150 * time.Millisecond},
		StreamPoll: 100 * time.Millisecond,
	})
	var rep report
	runScript(ctx, t, node, "stream.mjs", &rep, s.URL, shotDir(t))
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
