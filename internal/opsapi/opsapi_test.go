package opsapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var ctx = context.Background()

type bundle struct {
	env *testenv.Env
	l   *ledger.Ledger
	h   *opsapi.Handler
}

func setup(t *testing.T, e *testenv.Env) *bundle {
	t.Helper()
	// Every reading of the clock moves it on by a millisecond: kumo orders
	// equal index sort keys (dead_lettered_at) unstably across pages, so
	// items parked "at the same instant" could be skipped by pagination.
	start := time.Now().UTC().Truncate(time.Millisecond)
	var ticks atomic.Int64
	l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable,
		Now: func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{env: e, l: l, h: &opsapi.Handler{Ledger: l, Dispatch: &dispatch.Sender{SQS: e.SQS, QueueURL: e.Names.TaskQueueURL}}}
}

// parked creates a task, claims it and parks it (attempt budget used up).
func parked(t *testing.T, b *bundle, key string) *ledger.Task {
	t.Helper()
	task, err := b.l.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: key, Kind: "generate",
		Input: `{"prompt":"hi"}`, PayloadSHA256: "sha-" + key, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if task, err = b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if task, err = b.l.ScheduleRetry(ctx, task.TaskID, task.AssignmentVersion, b.l.Now(), "transient", "503"); err != nil {
		t.Fatal(err)
	}
	out, err := b.l.Park(ctx, task, ledger.ParkOptions{State: task.State, Version: task.AssignmentVersion}, review.BudgetExhausted(task, review.BudgetAttempts))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func do(t *testing.T, b *bundle, method, path, body string) (int, http.Header, map[string]any) {
	t.Helper()
	var req *http.Request
	if body == "" {
		req = httptest.NewRequest(method, path, nil)
	} else {
		req = httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	req.Host = "localhost:3000" // what the page's requests carry
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s %s: body %q is not JSON: %v", method, path, rec.Body.String(), err)
	}
	return rec.Code, rec.Header(), m
}

func wantProblem(t *testing.T, code int, h http.Header, m map[string]any, status int, slug string) {
	t.Helper()
	if code != status || h.Get("Content-Type") != "application/problem+json" || m["type"] != opsapi.ProblemType(slug) || m["status"] != float64(status) {
		t.Fatalf("got %d %s %v, want %d problem %s", code, h.Get("Content-Type"), m, status, slug)
	}
}

func TestListAndShow(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		var ids []string
		for _, k := range []string{"a", "b", "c"} {
			ids = append(ids, parked(t, b, k).TaskID)
		}
		if _, err := b.l.PutPoison(ctx, review.Poison("m-1", strings.Repeat("0", 64), 3, "not JSON")); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		cursor := ""
		for page := 0; ; page++ {
			code, _, m := do(t, b, "GET", "/reviews?limit=3&cursor="+cursor, "")
			if code != 200 {
				t.Fatalf("list: %d %v", code, m)
			}
			for _, it := range m["items"].([]any) {
				seen[it.(map[string]any)["task_id"].(string)] = true
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				break
			}
			if page > 3 {
				t.Fatal("pagination does not end")
			}
			cursor = next
		}
		if len(seen) != 4 || !seen["msg_m-1"] || !seen[ids[0]] {
			t.Fatalf("listed %v, want the 3 tasks and the poison item", seen)
		}

		code, _, m := do(t, b, "GET", "/reviews/"+ids[1], "")
		task, _ := m["task"].(map[string]any)
		rv, _ := m["review"].(map[string]any)
		if code != 200 || task["state"] != "needs_review" || rv["reason"] != "budget_exhausted" || rv["review_status"] != "open" {
			t.Fatalf("show: %d %v", code, m)
		}
		if _, leaked := task["input"]; leaked {
			t.Fatal("the operator view exposes the task input")
		}
		code, _, m = do(t, b, "GET", "/reviews/msg_m-1", "")
		if code != 200 || m["task"] != nil || m["review"].(map[string]any)["reason"] != "poison_message" {
			t.Fatalf("show poison: %d %v", code, m)
		}

		c, h, m := do(t, b, "GET", "/reviews/t_aaaaaaaaaaaaaaaaaaaaaaaaaa", "")
		wantProblem(t, c, h, m, 404, "not-found")
		c, h, m = do(t, b, "GET", "/reviews/..%2f..", "")
		wantProblem(t, c, h, m, 404, "not-found")
		c, h, m = do(t, b, "GET", "/reviews?cursor=not-a-cursor!", "")
		wantProblem(t, c, h, m, 400, "bad-cursor")
		c, h, m = do(t, b, "GET", "/reviews?limit=1000", "")
		wantProblem(t, c, h, m, 400, "invalid-request")
	})
}

func TestRetryChangesTaskAndItemTogetherAndReplays(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := parked(t, b, "retry")
		path := "/reviews/" + task.TaskID + "/retry"
		code, _, m := do(t, b, "POST", path, `{"by":"ops@example.com","note":"provider fixed"}`)
		if code != 200 || m["replayed"] != false || m["dispatched"] != true {
			t.Fatalf("retry: %d %v", code, m)
		}
		got, err := b.l.Get(ctx, task.TaskID)
		if err != nil || got.State != ledger.StateQueued || got.Attempts != 0 {
			t.Fatalf("task after retry = %+v %v", got, err)
		}
		rv, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil || rv.ReviewStatus != ledger.ReviewResolved || rv.Resolution != ledger.ResolutionRetry || rv.ResolvedBy != "ops@example.com" || rv.ResolvedAt == "" {
			t.Fatalf("review after retry = %+v %v", rv, err)
		}
		code, _, m = do(t, b, "POST", path, `{"by":"ops@example.com","note":"provider fixed"}`)
		if code != 200 || m["replayed"] != true || m["dispatched"] != nil {
			t.Fatalf("repeated retry: %d %v, want 200 replayed", code, m)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 || ids[0] != task.TaskID {
			t.Fatalf("queue = %v, want one message (the replay sends nothing)", ids)
		}
		c, h, m := do(t, b, "POST", "/reviews/"+task.TaskID+"/resolve", `{"outcome":"failed","note":"x","by":"ops"}`)
		wantProblem(t, c, h, m, 409, "state-conflict")
	})
}

func TestResolve(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		done := parked(t, b, "done")
		failed := parked(t, b, "failed")

		body := `{"outcome":"completed","note":"provider console shows request req-9 succeeded","by":"ops"}`
		code, _, m := do(t, b, "POST", "/reviews/"+done.TaskID+"/resolve", body)
		if code != 200 || m["replayed"] != false || m["task"].(map[string]any)["state"] != "completed" {
			t.Fatalf("resolve completed: %d %v", code, m)
		}
		got, _ := b.l.Get(ctx, done.TaskID)
		rv, _ := b.l.GetReview(ctx, done.TaskID)
		if got.State != ledger.StateCompleted || !strings.Contains(got.Result, "req-9") || rv.Resolution != ledger.ResolutionCompleted || rv.ResolutionNote == "" {
			t.Fatalf("after resolve: task %s result %q review %+v", got.State, got.Result, rv)
		}
		code, _, m = do(t, b, "POST", "/reviews/"+done.TaskID+"/resolve", body)
		if code != 200 || m["replayed"] != true {
			t.Fatalf("repeated resolve: %d %v", code, m)
		}

		code, _, m = do(t, b, "POST", "/reviews/"+failed.TaskID+"/resolve", `{"outcome":"failed","note":"input is unusable","by":"ops"}`)
		if code != 200 || m["task"].(map[string]any)["state"] != "failed" {
			t.Fatalf("resolve failed: %d %v", code, m)
		}

		p := "/reviews/" + done.TaskID + "/resolve"
		c, h, m := do(t, b, "POST", "/reviews/"+parked(t, b, "x").TaskID+"/resolve", `{"outcome":"failed","by":"ops"}`)
		wantProblem(t, c, h, m, 400, "invalid-action") // a note is required
		c, h, m = do(t, b, "POST", p, `{"outcome":"retry","note":"n","by":"ops"}`)
		wantProblem(t, c, h, m, 400, "invalid-action")
		c, h, m = do(t, b, "POST", p, `{"outcome":"failed","note":"n","by":"ops","extra":1}`)
		wantProblem(t, c, h, m, 400, "malformed-json")
		c, h, m = do(t, b, "POST", p, `{"outcome":`)
		wantProblem(t, c, h, m, 400, "malformed-json")
		c, h, m = do(t, b, "POST", p, `{"outcome":"failed","note":"`+strings.Repeat("x", opsapi.MaxBody)+`","by":"ops"}`)
		wantProblem(t, c, h, m, 413, "body-too-large")

		req := httptest.NewRequest("POST", p, strings.NewReader(`outcome=failed`))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Host = "127.0.0.1:3000"
		rec := httptest.NewRecorder()
		b.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnsupportedMediaType {
			t.Fatalf("form post = %d, want 415", rec.Code)
		}
	})
}

// TestHostCheck: a request whose Host is not the server's own loopback
// address (a DNS-rebinding page: its domain now resolves to 127.0.0.1, but
// the browser still names it) is 421 problem+json, over a real socket, and
// changes nothing; the server's own names are served.
func TestHostCheck(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := parked(t, b, "rebind")
		srv := httptest.NewServer(b.h)
		t.Cleanup(srv.Close)
		b.h.Hosts = opsapi.LoopbackHosts(srv.Listener.Addr())
		_, port, _ := strings.Cut(srv.Listener.Addr().String(), ":")
		send := func(method, host, path, body string) (int, map[string]any) {
			t.Helper()
			req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
			}
			if resp.StatusCode == http.StatusMisdirectedRequest && resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("421 without problem+json: %v", resp.Header)
			}
			return resp.StatusCode, m
		}
		retry := "/reviews/" + task.TaskID + "/retry"
		for _, host := range []string{"attacker.example:" + port, "attacker.example", "127.0.0.1.nip.io:" + port, "localhost:1"} {
			code, m := send("POST", host, retry, `{"by":"mallory","note":"rebound"}`)
			if code != http.StatusMisdirectedRequest || m["type"] != opsapi.ProblemType("host-not-allowed") {
				t.Fatalf("Host %q: %d %v, want 421 host-not-allowed", host, code, m)
			}
			if code, _ := send("GET", host, "/reviews", ""); code != http.StatusMisdirectedRequest {
				t.Fatalf("GET with Host %q = %d", host, code)
			}
		}
		if got, _ := b.l.Get(ctx, task.TaskID); got.State != ledger.StateNeedsReview {
			t.Fatalf("a refused retry changed the task: %s", got.State)
		}
		for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port} {
			if code, _ := send("GET", host, "/reviews", ""); code != http.StatusOK {
				t.Fatalf("GET with Host %q = %d, want 200", host, code)
			}
		}
		// Without configured Hosts: loopback names on any port only.
		b.h.Hosts = nil
		if code, _ := send("GET", "[::1]:8080", "/reviews", ""); code != http.StatusOK {
			t.Fatalf("default hosts refuse [::1]: %d", code)
		}
		if code, _ := send("GET", "evil.example:8080", "/reviews", ""); code != http.StatusMisdirectedRequest {
			t.Fatalf("default hosts accept evil.example: %d", code)
		}
	})
}

// TestRetryOfABudgetedTaskWhoseRecordIsGone: a parked task with a budget
// whose budget records are gone is retried only while it is younger than
// the records' retention (nothing can have been reserved on a record that
// never existed since); older, the records may have held spend that TTL
// deleted, and the retry is 409 budget-record-expired, nothing changed.
func TestRetryOfABudgetedTaskWhoseRecordIsGone(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		for _, c := range []struct {
			age    time.Duration
			status int
		}{{24 * time.Hour, http.StatusOK}, {spend.DefaultRetention + time.Hour, http.StatusConflict}} {
			key := fmt.Sprintf("budgeted-%d", c.status)
			task, err := b.l.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: key, Kind: "generate",
				Input: `{"prompt":"hi"}`, PayloadSHA256: "sha-" + key, MaxAttempts: 1, BudgetMaxTokens: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if task, err = b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if _, err = b.l.Park(ctx, task, ledger.ParkOptions{State: task.State, Version: task.AssignmentVersion}, review.BudgetExhausted(task, review.BudgetAttempts)); err != nil {
				t.Fatal(err)
			}
			later := task.Created().Add(c.age)
			if b.h.Budgets, err = spend.NewAccountant(spend.AccountantConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Now: func() time.Time { return later }}); err != nil {
				t.Fatal(err)
			}
			code, h, m := do(t, b, http.MethodPost, "/reviews/"+task.TaskID+"/retry", `{"by":"ops","note":"again"}`)
			got, err := b.l.Get(ctx, task.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			if c.status == http.StatusConflict {
				wantProblem(t, code, h, m, http.StatusConflict, "budget-record-expired")
				if got.State != ledger.StateNeedsReview {
					t.Fatalf("after the refused retry the task is %s, want needs_review (nothing changed)", got.State)
				}
				continue
			}
			if code != http.StatusOK || got.State != ledger.StateQueued {
				t.Fatalf("retry %s after creation, no record ever made: %d %v, task %s; want 200 and queued", c.age, code, m, got.State)
			}
		}
	})
}
