package web_test

import (
	"testing"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// overviewReport is what web/test/overview.mjs prints as its last line.
type overviewReport struct {
	report
	Figures struct {
		States  map[string]int     `json:"states"`
		Ages    map[string]float64 `json:"ages"`
		Rates   map[string]float64 `json:"rates"`
		NoData  []string           `json:"noData"`
		Reviews map[string]int     `json:"reviews"`
	} `json:"figures"`
}

// TestBrowserOverview opens the Overview tab in headless Chromium on a
// fresh local stack, submits completing, failing, parking, throttled and
// slow tasks, and waits for the charts to show them (figures asserted in
// web/test/overview.mjs); then checks here that what the tab showed is what
// the ledger holds. Screenshots: overview-*.png in the screenshot dir
// (TASKLEDGER_SCREENSHOTS, default web/test/screenshots).
func TestBrowserOverview(t *testing.T) {
	t.Parallel()
	node := needBrowser(t)
	ctx := browserCtx(t)
	s := startStack(ctx, t, local.Options{})

	var rep overviewReport
	runScript(ctx, t, node, "overview.mjs", &rep, s.URL, shotDir(t))
	checkScreenshots(t, rep.Screenshots, 3)

	// The tab's figures match the ledger: the parked task's review is the
	// provider_config one it counted, the failed task failed, and the slow
	// task it showed active (queued or running) was claimed.
	creds, err := s.Ledger.GetReview(ctx, rep.Tasks["creds"])
	if err != nil {
		t.Fatalf("review of the credentials task: %v", err)
	}
	if creds.Reason != ledger.ReviewProviderConfig || rep.Figures.Reviews[creds.Reason] != 1 {
		t.Errorf("review reason %q; the tab showed %v", creds.Reason, rep.Figures.Reviews)
	}
	bad, err := s.Ledger.Get(ctx, rep.Tasks["bad"])
	if err != nil || bad.State != ledger.StateFailed {
		t.Errorf("bad_request task: %v %v, want failed", bad, err)
	}
	slow, err := s.Ledger.Get(ctx, rep.Tasks["slow"])
	if err != nil || slow.Attempts < 1 {
		t.Errorf("slow task: %v %v, want claimed", slow, err)
	}
	if rep.Figures.States["active"] < 1 || rep.Figures.Rates["failed"] != 1 {
		t.Errorf("figures: %+v", rep.Figures)
	}
}

// TestOverviewChartLogic runs the node unit tests of static/chart.js.
func TestOverviewChartLogic(t *testing.T) {
	t.Parallel()
	runNodeTests(t, "chart.test.mjs")
}
