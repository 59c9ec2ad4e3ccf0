package web_test

import (
	"testing"

	"github.com/taskledger/taskledger/internal/local"
)

// TestBrowserNotificationLinkOpensTheTask: a notification's link,
// <page_origin>/#task=<id> (internal/followup), opened in a fresh page,
// shows that task (web/test/tasklink.mjs) — the link is how a requester
// or an approver reaches the task the email tells them about.
func TestBrowserNotificationLinkOpensTheTask(t *testing.T) {
	t.Parallel()
	node := needBrowser(t)
	ctx := browserCtx(t)
	s := startStack(ctx, t, local.Options{})
	var rep report
	runScript(ctx, t, node, "tasklink.mjs", &rep, s.URL, shotDir(t))
	if _, err := s.Ledger.Get(ctx, rep.Tasks["linked"]); err != nil {
		t.Fatalf("linked task %q: %v", rep.Tasks["linked"], err)
	}
}
