package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/testenv"
)

// The browser tests' shared pieces: the tools they need, a local stack per
// test, the screenshot directory, running a web/test/*.mjs script and
// reading the one-line JSON report it prints last (web/test/harness.mjs),
// and the screenshot checks.

// Chromium is Debian's chromium package; the test never uses a browser
// build downloaded by playwright.
const chromium = "/usr/bin/chromium"

// requireEnv makes missing browser-test tools a failure instead of a skip
// (CI sets it; `make deps` installs them).
const requireEnv = "TASKLEDGER_REQUIRE_BROWSER"

// browserTimeout bounds one browser test: stack, script and ledger checks.
const browserTimeout = 4 * time.Minute

// missing skips t, or fails it when requireEnv is "1".
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf(format+" ("+requireEnv+"=1; run `make deps`)", args...)
	}
	t.Skipf(format+" (run `make deps`; set "+requireEnv+"=1 to fail instead)", args...)
}

func needNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node not found on PATH")
	}
	return node
}

func needBrowser(t *testing.T) string {
	t.Helper()
	node := needNode(t)
	if fi, err := os.Stat(chromium); err != nil || fi.IsDir() {
		missing(t, "%s not found (Debian package chromium)", chromium)
	}
	if _, err := os.Stat(filepath.Join("test", "node_modules", "playwright-core", "package.json")); err != nil {
		missing(t, "web/test/node_modules/playwright-core not installed (cd web/test && npm ci)")
	}
	return node
}

// browserCtx bounds a browser test by browserTimeout; it is cancelled when
// t ends.
func browserCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), browserTimeout)
	t.Cleanup(cancel)
	return ctx
}

// startStack starts a local stack for one browser test (loopback, free
// port, reconciler every 5 s, no status line) with o's other options, and
// closes it when t ends. The embedded emulator's state is shared by the
// process: each stack gets fresh tables, so counts see only its test's
// tasks. No step waits for the reconciler, which still runs a few times in
// each test; every run makes 161 queries (each by_state stream walked and
// counted), which at a sub-second period took a good part of the package's
// CPU time.
func startStack(ctx context.Context, t *testing.T, o local.Options) *local.Stack {
	t.Helper()
	o.Addr = "127.0.0.1:0"
	o.ReconcileEvery = 5 * time.Second
	o.StatusEvery = -1
	o.Prefix = testenv.UniquePrefix()
	s, err := local.Start(ctx, o)
	if err != nil {
		t.Fatalf("local.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("stack Close: %v", err)
		}
	})
	return s
}

// shotDir is the absolute screenshot directory: TASKLEDGER_SCREENSHOTS,
// default web/test/screenshots.
func shotDir(t *testing.T) string {
	t.Helper()
	shots := os.Getenv("TASKLEDGER_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join("test", "screenshots")
	}
	shots, err := filepath.Abs(shots)
	if err != nil {
		t.Fatal(err)
	}
	return shots
}

// report is what the web/test/*.mjs scripts print as their last stdout
// line (harness.mjs); scripts that report more embed it.
type report struct {
	OK    bool `json:"ok"`
	Steps []struct {
		Name   string          `json:"name"`
		OK     bool            `json:"ok"`
		MS     int64           `json:"ms"`
		Detail json.RawMessage `json:"detail"`
	} `json:"steps"`
	Screenshots []string          `json:"screenshots"`
	Tasks       map[string]string `json:"tasks"`
	Errors      []string          `json:"errors"`
}

func (r *report) base() *report { return r }

// scriptReport is a report, or a type that embeds one.
type scriptReport interface{ base() *report }

// runScript runs node web/test/<script> args..., logs its stderr and reads
// its report into rep (see readReport).
func runScript(ctx context.Context, t *testing.T, node, script string, rep scriptReport, args ...string) {
	t.Helper()
	runGatedScript(ctx, t, node, script, nil, rep, args...)
}

// runGatedScript is runScript for a script that sets gate (harness.mjs
// streamGate): each of its gate lines on stdout sets gate, answered "ok"
// on its stdin once set; a gate line when gate is nil fails t.
func runGatedScript(ctx context.Context, t *testing.T, node, script string, gate *streamGate, rep scriptReport, args ...string) {
	t.Helper()
	stdout, stderr, runErr := execGatedScript(ctx, t, node, script, gate, args...)
	t.Logf("%s stderr:\n%s", script, stderr)
	readReport(t, script, stdout, runErr, rep)
}

// execGatedScript runs node web/test/<script> args..., serving its gate
// lines (runGatedScript), and returns its stdout without them, its stderr
// and how it ended.
func execGatedScript(ctx context.Context, t *testing.T, node, script string, gate *streamGate, args ...string) ([]byte, string, error) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("test", script)}, args...)...)
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Gate lines are served as they arrive, by the writer exec copies
	// stdout to: so WaitDelay still bounds the wait on a stdout that an
	// orphan of the script holds open (a pipe read here would not be).
	w := &gateWriter{t: t, script: script, gate: gate, stdin: stdin}
	cmd.Stdout = w
	runErr := cmd.Run()
	w.flush()
	return w.out.Bytes(), stderr.String(), runErr
}

// gateWriter is a gated script's stdout: it answers each gate line on the
// script's stdin and keeps every other line.
type gateWriter struct {
	t       *testing.T
	script  string
	gate    *streamGate
	stdin   io.Writer
	out     bytes.Buffer
	partial []byte
}

func (w *gateWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(w.partial[:i+1])
		w.partial = w.partial[i+1:]
	}
}

// flush keeps a last line without its newline.
func (w *gateWriter) flush() {
	if len(w.partial) > 0 {
		w.line(w.partial)
		w.partial = nil
	}
}

func (w *gateWriter) line(line []byte) {
	prompt, allow, ok := parseGateLine(line)
	if !ok {
		w.out.Write(line)
		return
	}
	answer := "ok\n"
	if w.gate == nil {
		w.t.Errorf("%s set a stream gate, but its test has none", w.script)
		answer = "this test has no stream gate\n"
	} else {
		w.gate.set(prompt, allow)
	}
	_, _ = io.WriteString(w.stdin, answer)
}

// readReport parses the last line of script's stdout into rep, logs its
// steps and the browser's console errors, and fails t unless the script
// exited cleanly (runErr nil) with ok true.
func readReport(t *testing.T, script string, stdout []byte, runErr error, rep scriptReport) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), rep); err != nil {
		t.Fatalf("%s printed no JSON report (%v); stdout:\n%s", script, err, clip(string(stdout), 4000))
	}
	r := rep.base()
	for _, st := range r.Steps {
		t.Logf("step %-80q ok=%t %5dms %s", st.Name, st.OK, st.MS, clip(string(st.Detail), 600))
	}
	if runErr != nil || !r.OK {
		t.Fatalf("%s failed (exit: %v, ok=%t)", script, runErr, r.OK)
	}
	for _, e := range r.Errors {
		t.Logf("browser console: %s", e)
	}
}

// checkScreenshots fails t unless there are at least want screenshots, and
// flags any that is not a plausible PNG.
func checkScreenshots(t *testing.T, shots []string, want int) {
	t.Helper()
	if len(shots) < want {
		t.Fatalf("screenshots: %v, want %d", shots, want)
	}
	for _, p := range shots {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 10_000 {
			t.Errorf("screenshot %s: not a plausible PNG (%d bytes)", p, len(b))
		}
	}
	t.Logf("screenshots: %s", strings.Join(shots, " "))
}

// runNodeTests runs `node --test` on web/test/<file> (node only, no
// browser, no npm packages) and fails t unless some test passed.
func runNodeTests(t *testing.T, file string) {
	t.Helper()
	node := needNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "--test", "--test-reporter=tap", filepath.Join("test", file)).CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^# pass (\d+)$`).FindSubmatch(out)
	if m == nil || string(m[1]) == "0" {
		t.Fatalf("node --test ran no passing test:\n%s", out)
	}
	t.Logf("node unit tests passed: %s", m[1])
}

// recorder is an https server on loopback, another origin than the stack's,
// that records every request it gets (CORS preflights included) and answers
// each with a 404 that allows no origin.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.URL.RequestURI()+" Authorization="+clip(req.Header.Get("Authorization"), 16))
		r.mu.Unlock()
		http.NotFound(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

// requests are the requests the recorder got so far.
func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func ptr[T any](v T) *T { return &v }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// issuerLine is the first stdout line of a sign-in script (signin.mjs,
// signinloop.mjs): the local OpenID Connect issuer it started (npm
// oauth2-mock-server) and the client id the page signs in as.
type issuerLine struct {
	Issuer   string `json:"issuer"`
	ClientID string `json:"client_id"`
}

// runWithIssuer runs the sign-in script web/test/<script>: it starts its
// issuer and prints an issuerLine; this starts the local stack with
// options(that line) and writes the stack's URL as one stdin line; the
// script drives the page and prints its JSON report last, read into rep
// (readReport). It returns the context and the stack, for checks of the
// ledger after the script.
func runWithIssuer(t *testing.T, script string, options func(issuerLine) local.Options, rep scriptReport) (context.Context, *local.Stack) {
	t.Helper()
	node := needBrowser(t)
	if _, err := os.Stat(filepath.Join("test", "node_modules", "oauth2-mock-server", "package.json")); err != nil {
		missing(t, "web/test/node_modules/oauth2-mock-server not installed (cd web/test && npm ci)")
	}
	ctx := browserCtx(t)

	cmd := exec.CommandContext(ctx, node, filepath.Join("test", script), shotDir(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", script, err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	out := bufio.NewReader(stdoutPipe)
	first, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("%s printed no issuer line (%v); stderr:\n%s", script, err, stderr.String())
	}
	var iss issuerLine
	if err := json.Unmarshal([]byte(first), &iss); err != nil || iss.Issuer == "" || iss.ClientID == "" {
		t.Fatalf("issuer line %q: %v", first, err)
	}

	s := startStack(ctx, t, options(iss))
	if _, err := io.WriteString(stdin, s.URL+"\n"); err != nil {
		t.Fatalf("write stack URL: %v", err)
	}
	_ = stdin.Close()

	rest, _ := io.ReadAll(out)
	runErr := cmd.Wait()
	t.Logf("%s stderr:\n%s", script, stderr.String())
	readReport(t, script, rest, runErr, rep)
	return ctx, s
}
