package web_test

import (
	"errors"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/web"
)

// TestBrowser drives the page in headless Chromium against a local stack
// (embedded emulator, simulated provider) and then checks, in the ledger,
// that what the page showed is what happened. It also opens the page with
// ?api= naming another origin, a recorder, and then again with that origin
// remembered as older pages did: the page must send it nothing (a bearer
// sent there would be a stolen token).
func TestBrowser(t *testing.T) {
	t.Parallel()
	node := needBrowser(t)
	ctx := browserCtx(t)
	s := startStack(ctx, t, local.Options{})
	rec := startRecorder(t)
	// Checked even when the script fails (it runs before a t.Fatal unwinds).
	defer func() {
		if got := rec.requests(); len(got) > 0 {
			t.Errorf("the origin named by ?api= got %d requests from the page, want none: %v", len(got), got)
		}
	}()

	var rep report
	runScript(ctx, t, node, "browser.mjs", &rep, s.URL, shotDir(t), rec.URL)
	checkScreenshots(t, rep.Screenshots, 1)

	// What the page showed is what the ledger holds.
	want := map[string]ledger.State{
		"completed":       ledger.StateCompleted,
		"regenerated":     ledger.StateCompleted,
		"doubleClick":     "",
		"slowDoubleClick": "",
		"retried":         "",
		"parked":          ledger.StateFailed,
		"throttled":       ledger.StateCompleted,
	}
	for name, state := range want {
		id := rep.Tasks[name]
		if id == "" {
			t.Fatalf("report names no %q task: %v", name, rep.Tasks)
		}
		task, err := s.Ledger.Get(ctx, id)
		if err != nil {
			t.Fatalf("%s task %s: %v", name, id, err)
		}
		if state != "" && task.State != state {
			t.Errorf("%s task %s: state %s, want %s", name, id, task.State, state)
		}
	}
	if p, c := rep.Tasks["regenerated"], rep.Tasks["completed"]; p != "" {
		if task, err := s.Ledger.Get(ctx, p); err == nil && task.ParentTaskID != c {
			t.Errorf("regenerated task's parent = %q, want %q", task.ParentTaskID, c)
		}
	}
	if task, err := s.Ledger.Get(ctx, rep.Tasks["throttled"]); err == nil {
		if h := task.History(); len(h) != 2 || h[0].Outcome != ledger.OutcomeRetry || h[1].Outcome != ledger.OutcomeCompleted {
			t.Errorf("throttled task's history = %+v; want a retried attempt, then a completed one", h)
		}
	}
	rv, err := s.Ledger.GetReview(ctx, rep.Tasks["parked"])
	if err != nil {
		t.Fatalf("review item: %v", err)
	}
	if rv.ReviewStatus != "resolved" || rv.ResolvedBy != "browser-test" || rv.Resolution != "failed" {
		t.Errorf("review item: status %q, resolution %q by %q; want resolved, failed, by browser-test", rv.ReviewStatus, rv.Resolution, rv.ResolvedBy)
	}
	if rv.ParkCount < 2 {
		t.Errorf("review item park_count = %d, want >= 2 (parked, retried from the page, parked again)", rv.ParkCount)
	}
	// Every logical submission of the run made exactly one task: the double
	// clicks and the retried send included.
	out, err := s.DDB.Scan(ctx, &dynamodb.ScanInput{TableName: &s.Names.TasksTable, Select: types.SelectCount, ConsistentRead: ptr(true)})
	if err != nil {
		t.Fatalf("scan tasks: %v", err)
	}
	if out.Count != int32(len(want)) {
		t.Errorf("tasks table holds %d tasks, want %d (one per logical submission)", out.Count, len(want))
	}
}

// TestBrowserSignIn drives the page's OpenID Connect sign-in in headless
// Chromium: web/test/signin.mjs starts a local issuer from npm
// (oauth2-mock-server), this test starts the local stack with its emulated
// API Gateway JWT authorizer pointed at that issuer, and the script signs
// two users in, submits, reads across users, and presents an expired
// token. The ledger then shows the tasks under each user's own scope.
func TestBrowserSignIn(t *testing.T) {
	t.Parallel()
	var rep report
	ctx, s := runWithIssuer(t, "signin.mjs", func(iss issuerLine) local.Options {
		return local.Options{OIDCIssuer: iss.Issuer, OIDCAudience: []string{iss.ClientID}}
	}, &rep)
	if len(rep.Screenshots) < 3 {
		t.Errorf("screenshots: %v, want the signed-out, signed-in and second-user pages", rep.Screenshots)
	}
	t.Logf("screenshots: %s", strings.Join(rep.Screenshots, " "))

	// The ledger: each user's task under their own JWT scope, and nothing
	// from the refused requests.
	for user, want := range map[string]ledger.State{"alice": ledger.StateCompleted, "bob": ""} {
		id := rep.Tasks[user]
		task, err := s.Ledger.Get(ctx, id)
		if err != nil {
			t.Fatalf("%s's task %q: %v", user, id, err)
		}
		if task.Scope != "jwt:"+user {
			t.Errorf("%s's task scope = %q, want jwt:%s", user, task.Scope, user)
		}
		if want != "" && task.State != want {
			t.Errorf("%s's task state = %s, want %s", user, task.State, want)
		}
	}
	n, err := s.DDB.Scan(ctx, &dynamodb.ScanInput{TableName: &s.Names.TasksTable, Select: types.SelectCount, ConsistentRead: ptr(true)})
	if err != nil {
		t.Fatalf("scan tasks: %v", err)
	}
	if n.Count != 2 {
		t.Errorf("tasks table holds %d tasks, want 2 (alice's and bob's; the refused requests wrote nothing)", n.Count)
	}
}

// TestPageLogic runs the node unit tests of static/lib.js (node only, no
// browser, no npm packages).
func TestPageLogic(t *testing.T) {
	t.Parallel()
	runNodeTests(t, "lib.test.mjs")
}

// TestFS checks the embedded page: its files are there, and it loads
// nothing from the network (every src/href is relative; no CSS imports or
// remote urls).
func TestFS(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"index.html", "app.js", "lib.js", "style.css"} {
		b, err := fs.ReadFile(web.FS, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(b) == 0 {
			t.Fatalf("%s is empty", name)
		}
	}
	html, _ := fs.ReadFile(web.FS, "index.html")
	refs := regexp.MustCompile(`(?i)\b(?:src|href)\s*=\s*"([^"]*)"`).FindAllSubmatch(html, -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references %d files, want at least style.css, lib.js, app.js", len(refs))
	}
	for _, m := range refs {
		ref := string(m[1])
		switch {
		case ref == "#" || strings.HasPrefix(ref, "data:"):
		case strings.Contains(ref, ":") || strings.HasPrefix(ref, "//"):
			t.Errorf("index.html loads %q from the network", ref)
		case !strings.HasPrefix(ref, "static/"):
			t.Errorf("index.html references %q: the API serves the page's files under static/ only", ref)
		default:
			if _, err := fs.Stat(web.FS, strings.TrimPrefix(ref, "static/")); err != nil {
				t.Errorf("index.html references %q: %v", ref, err)
			}
		}
	}
	css, _ := fs.ReadFile(web.FS, "style.css")
	if regexp.MustCompile(`(?i)@import|url\(`).Match(css) {
		t.Error("style.css imports or loads a url")
	}
	if _, err := fs.Stat(web.FS, "static"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("web.FS is not rooted at static/ (found a static/ inside it: %v)", err)
	}
}
