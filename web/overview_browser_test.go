package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/testenv"
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

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	s, err := local.Start(ctx, local.Options{
		Addr:           "127.0.0.1:0",
		ReconcileEvery: 500 * time.Millisecond,
		StatusEvery:    -1,
		Prefix:         testenv.UniquePrefix(),
	})
	if err != nil {
		t.Fatalf("local.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("stack Close: %v", err)
		}
	})
	shots := os.Getenv("TASKLEDGER_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join("test", "screenshots")
	}
	if shots, err = filepath.Abs(shots); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, filepath.Join("test", "overview.mjs"), s.URL, shots)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	runErr := cmd.Run()
	t.Logf("overview.mjs stderr:\n%s", stderr.String())

	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var rep overviewReport
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("overview.mjs printed no JSON report (%v); stdout:\n%s", err, clip(stdout.String(), 4000))
	}
	for _, st := range rep.Steps {
		t.Logf("step %-80q ok=%t %5dms %s", st.Name, st.OK, st.MS, clip(string(st.Detail), 600))
	}
	if runErr != nil || !rep.OK {
		t.Fatalf("overview browser test failed (exit: %v, ok=%t)", runErr, rep.OK)
	}
	if len(rep.Screenshots) < 3 {
		t.Fatalf("screenshots: %v, want 3", rep.Screenshots)
	}
	for _, p := range rep.Screenshots {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 10_000 {
			t.Errorf("screenshot %s: not a plausible PNG (%d bytes)", p, len(b))
		}
	}
	t.Logf("screenshots: %s", strings.Join(rep.Screenshots, " "))

	// The tab's figures match the ledger: the parked task's review is the
	// provider_config one it counted, the failed task failed, and the slow
	// task it showed running was claimed.
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
	if rep.Figures.States["running"] < 1 || rep.Figures.Rates["failed"] != 1 {
		t.Errorf("figures: %+v", rep.Figures)
	}
}

// TestOverviewChartLogic runs the node unit tests of static/chart.js.
func TestOverviewChartLogic(t *testing.T) {
	t.Parallel()
	node := needNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "--test", "--test-reporter=tap", filepath.Join("test", "chart.test.mjs")).CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^# pass (\d+)$`).FindSubmatch(out)
	if m == nil || string(m[1]) == "0" {
		t.Fatalf("node --test ran no passing test:\n%s", out)
	}
}
