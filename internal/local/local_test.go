package local_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

type stackBundle struct {
	st       *local.Stack
	progress *testenv.Buffer
	client   *http.Client
}

func setupStack(t *testing.T, o local.Options) stackBundle {
	t.Helper()
	prog := &testenv.Buffer{}
	o.Addr = "127.0.0.1:0"
	o.Prefix = testenv.UniquePrefix()
	o.Progress = prog
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := local.Start(ctx, o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			t.Logf("progress:\n%s", prog.String())
		}
	})
	return stackBundle{st: st, progress: prog, client: &http.Client{Timeout: 10 * time.Second}}
}

type taskView struct {
	TaskID   string `json:"task_id"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Result   json.RawMessage
	Error    *struct{ Class, Message string }
}

func (b stackBundle) submit(t *testing.T, key, input string) taskView {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.st.URL+"/tasks", strings.NewReader(`{"kind":"generate","input":`+input+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("POST /tasks: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /tasks = %d %s, want 202", resp.StatusCode, body)
	}
	var v taskView
	if err := json.Unmarshal(body, &v); err != nil || v.TaskID == "" {
		t.Fatalf("POST /tasks body %s: %v", body, err)
	}
	if loc := resp.Header.Get("Location"); loc != "/tasks/"+v.TaskID {
		t.Errorf("Location = %q, want /tasks/%s", loc, v.TaskID)
	}
	return v
}

func (b stackBundle) get(t *testing.T, id string) taskView {
	t.Helper()
	resp, err := b.client.Get(b.st.URL + "/tasks/" + id)
	if err != nil {
		t.Fatalf("GET /tasks/%s: %v", id, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /tasks/%s = %d %s", id, resp.StatusCode, body)
	}
	var v taskView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("GET body %s: %v", body, err)
	}
	return v
}

// awaitState polls GET /tasks/{id} until the task is in want.
func (b stackBundle) awaitState(t *testing.T, id, want string, within time.Duration) taskView {
	t.Helper()
	var v taskView
	eventually(t, within, "task "+id+" to be "+want, func() bool {
		v = b.get(t, id)
		return v.State == want
	})
	return v
}

func TestStackCompletesTasks(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{StatusEvery: 200 * time.Millisecond})

	v := b.submit(t, "local-happy-1", `{"prompt":"Say hello"}`)
	if v.State != "queued" {
		t.Errorf("new task state %q, want queued", v.State)
	}
	// The local stack keys task ids with a per-process secret too: the id
	// cannot be computed from the (anonymous) caller's key.
	if v.TaskID == ledger.TaskID(api.Anonymous, "local-happy-1") {
		t.Errorf("task id %s is the unkeyed hash of the Idempotency-Key", v.TaskID)
	}
	done := b.awaitState(t, v.TaskID, "completed", 20*time.Second)
	if done.Attempts != 1 || len(done.Result) == 0 {
		t.Errorf("completed task attempts=%d result=%s, want 1 attempt and a result", done.Attempts, done.Result)
	}
	sim, ok := b.st.Provider.(*simulated.Provider)
	if !ok {
		t.Fatalf("provider is %T, want the simulated one", b.st.Provider)
	}
	if n := sim.SideEffects(v.TaskID); n != 1 {
		t.Errorf("provider side effects for %s = %d, want 1", v.TaskID, n)
	}
	eventually(t, 10*time.Second, "progress lines for the API call, the batch and the status", func() bool {
		p := b.progress.String()
		return strings.Contains(p, "http: POST /tasks → 202 "+v.TaskID) &&
			strings.Contains(p, "worker: batch of 1 → 1 completed") &&
			strings.Contains(p, "status: live active=0 retry_wait=0 unknown=0")
	})
	for _, want := range []string{"stack: created table " + b.st.Names.TasksTable, "stack: created queue "} {
		if !strings.Contains(b.progress.String(), want) {
			t.Errorf("progress lacks %q", want)
		}
	}
}

// A task whose first attempt is throttled goes back to the queue and
// completes on its second attempt, through the poller's partial batch
// handling and the worker's visibility change.
func TestStackTransientFailureCompletesLater(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{StatusEvery: -1})
	v := b.submit(t, "local-throttle-1", `{"prompt":"Say hello","simulate":"throttle"}`)
	done := b.awaitState(t, v.TaskID, "completed", 30*time.Second)
	if done.Attempts != 2 {
		t.Errorf("attempts = %d, want 2 (one throttled, one completed)", done.Attempts)
	}
	p := b.progress.String()
	if !strings.Contains(p, "1 retry_wait (1 back to the queue)") {
		t.Errorf("progress lacks the throttled batch:\n%s", p)
	}
}

// The stack serves the page the way the deployed API does: the submit
// handler answers /, /static/… and /auth/config (auth mode none without an
// issuer).
func TestStackServesPage(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{StatusEvery: -1})
	resp, body := get(t, b, "/", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `src="static/app.js"`) {
		t.Fatalf("GET / = %d %q, want the page", resp.StatusCode, clipTo(body, 200))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("GET / Content-Type = %q", ct)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("GET / CSP = %q", csp)
	}
	resp, body = get(t, b, "/static/app.js", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" || !strings.Contains(body, "TaskledgerLib") {
		t.Errorf("GET /static/app.js = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, _ := get(t, b, "/static/app.js", resp.Header.Get("ETag")); resp.StatusCode != http.StatusNotModified {
		t.Errorf("GET /static/app.js with its ETag = %d, want 304", resp.StatusCode)
	}
	for _, p := range []string{"/missing.js", "/static/missing.js", "/static/..%2fembed.go"} {
		if resp, _ := get(t, b, p, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
		}
	}
	resp, body = get(t, b, "/auth/config", "")
	var cfg map[string]string
	if err := json.Unmarshal([]byte(body), &cfg); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /auth/config = %d %q (%v)", resp.StatusCode, body, err)
	}
	if cfg["auth_mode"] != "none" || cfg["issuer"] != "" || cfg["client_id"] != "" {
		t.Errorf("GET /auth/config = %v, want auth_mode none without issuer or client id", cfg)
	}
}

func get(t *testing.T, b stackBundle, path, etag string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.st.URL+path, nil)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func clipTo(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func getBody(t *testing.T, b stackBundle, path string, want int) string {
	t.Helper()
	resp, err := b.client.Get(b.st.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s = %d, want %d", path, resp.StatusCode, want)
	}
	return string(body)
}

func TestStackClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := local.Start(ctx, local.Options{Addr: "127.0.0.1:0", Prefix: testenv.UniquePrefix()})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	addr := strings.TrimPrefix(st.URL, "http://")
	emu := st.Endpoint
	resp, err := http.Get(st.URL + "/")
	if err != nil {
		t.Fatalf("GET / before Close: %v", err)
	}
	resp.Body.Close()

	start := time.Now()
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for _, a := range []string{addr, strings.TrimPrefix(emu, "http://")} {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Close", a)
		}
	}
}

func TestStartRejectsNonLoopback(t *testing.T) {
	t.Parallel()
	_, err := local.Start(context.Background(), local.Options{Addr: "0.0.0.0:0"})
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("Start on 0.0.0.0 = %v, want a loopback error", err)
	}
}

// A task the provider rejects for configuration is parked; the operator API
// at /reviews lists it and resolves it.
func TestStackReviewFlow(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{StatusEvery: -1})
	v := b.submit(t, "local-review-1", `{"prompt":"Say hello","simulate":"credentials"}`)
	b.awaitState(t, v.TaskID, "needs_review", 20*time.Second)

	list := getBody(t, b, "/reviews", http.StatusOK)
	if !strings.Contains(list, v.TaskID) {
		t.Fatalf("GET /reviews does not list %s: %s", v.TaskID, list)
	}
	req, _ := http.NewRequest(http.MethodPost, b.st.URL+"/reviews/"+v.TaskID+"/resolve",
		strings.NewReader(`{"outcome":"failed","note":"bad credentials, not retrying","by":"local_test"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resolve = %d %s, want 200", resp.StatusCode, body)
	}
	if got := b.get(t, v.TaskID); got.State != "failed" {
		t.Errorf("task state after resolve = %q, want failed", got.State)
	}
	if p := b.progress.String(); !strings.Contains(p, "http: POST /reviews/"+v.TaskID+"/resolve → 200") {
		t.Errorf("progress lacks the resolve call:\n%s", p)
	}
}

// TestStackRefusesForeignHosts: every route of the local server — the task
// API, the page, the operator API — answers only requests addressed to its
// own loopback address, so a DNS-rebinding page (its own domain now
// resolving to 127.0.0.1) can neither submit nor read anything; a refused
// submit writes nothing.
func TestStackRefusesForeignHosts(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{StatusEvery: -1})
	_, port, _ := strings.Cut(strings.TrimPrefix(b.st.URL, "http://"), ":")
	do := func(method, host, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, b.st.URL+path, strings.NewReader(body))
		req.Host = host
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "rebound")
		}
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type") + " " + string(out)
	}
	submit := `{"kind":"generate","input":{"prompt":"rebound"}}`
	for _, host := range []string{"attacker.example:" + port, "127.0.0.1.nip.io:" + port} {
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/tasks", submit}, {"GET", "/tasks/t_aaaaaaaaaaaaaaaaaaaaaaaaaa", ""}, {"GET", "/", ""}, {"GET", "/reviews", ""},
		} {
			code, body := do(c.method, host, c.path, c.body)
			if code != http.StatusMisdirectedRequest || !strings.HasPrefix(body, "application/problem+json") {
				t.Fatalf("%s %s with Host %q = %d %s, want 421 problem+json", c.method, c.path, host, code, clipTo(body, 200))
			}
		}
	}
	// The refused submit wrote nothing: the same key from the real origin is new.
	if code, body := do("POST", "localhost:"+port, "/tasks", submit); code != http.StatusAccepted {
		t.Fatalf("POST /tasks with Host localhost:%s = %d %s, want 202 (a new task)", port, code, clipTo(body, 200))
	}
}

// cancel asks the stack to cancel task id and fails t unless it accepted.
func (b *stackBundle) cancel(t *testing.T, id string) {
	t.Helper()
	resp, err := b.client.Post(b.st.URL+"/tasks/"+id+"/cancel", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST cancel = %d", resp.StatusCode)
	}
}
