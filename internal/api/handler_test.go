package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

const prompt = "Write a haiku about idempotency."

// TestSubmitRows covers the POST /tasks rows of the DESIGN §5 table.
func TestSubmitRows(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)

		// 202: new task, Location, task view, one queue message.
		resp := b.do(t, submitReq("key-1", body(prompt)))
		wantStatus(t, resp, http.StatusAccepted)
		v := view(t, resp)
		id := ledger.TaskID(api.Anonymous, "key-1")
		if v.TaskID != id || resp.Headers["Location"] != "/tasks/"+id {
			t.Fatalf("task_id %q Location %q, want %s", v.TaskID, resp.Headers["Location"], id)
		}
		if _, ok := resp.Headers[api.HeaderIdempotentReplayed]; ok {
			t.Fatalf("a new task carries %s", api.HeaderIdempotentReplayed)
		}
		wantHash, _ := api.PayloadSHA256("generate", json.RawMessage(`{"prompt":"`+prompt+`"}`), "")
		if v.State != "queued" || v.Kind != "generate" || v.Attempts != 0 || v.MaxAttempts != ledger.DefaultMaxAttempts ||
			v.CorrelationID != id || v.Receipt.OperationID != id || v.Receipt.PayloadSHA256 != wantHash ||
			v.Result != nil || v.Error != nil || v.Review != nil || v.ParentTaskID != "" {
			t.Fatalf("view %+v", v)
		}
		if resp.Headers["X-Correlation-Id"] != id {
			t.Fatalf("X-Correlation-Id = %q", resp.Headers["X-Correlation-Id"])
		}
		stored, err := b.l.Get(context.Background(), id)
		if err != nil || stored.Input != `{"prompt":"`+prompt+`"}` || stored.Scope != api.Anonymous || stored.PayloadSHA256 != wantHash {
			t.Fatalf("stored %+v, %v", stored, err)
		}

		// 200 replay: same key, same payload with other key order and whitespace.
		replay := "{\n \"input\" : { \"prompt\" : \"" + prompt + "\" } ,\"kind\":\"generate\"}"
		resp = b.do(t, submitReq("key-1", replay))
		wantStatus(t, resp, http.StatusOK)
		if resp.Headers[api.HeaderIdempotentReplayed] != "true" || view(t, resp).TaskID != id {
			t.Fatalf("replay headers %v body %s", resp.Headers, resp.Body)
		}

		// 422: same key, other payload; nothing written.
		resp = b.do(t, submitReq("key-1", body(prompt+" In French.")))
		p := wantProblem(t, resp, http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
		if p.TaskID != "" || p.State != "" || strings.Contains(resp.Body, id) {
			t.Fatalf("422 leaks the task: %s", resp.Body)
		}
		after, _ := b.l.Get(context.Background(), id)
		if after.PayloadSHA256 != wantHash || after.UpdatedAt != stored.UpdatedAt {
			t.Fatalf("422 changed the task: %+v", after)
		}

		// Caller-supplied correlation id is kept and sent with the message.
		resp = b.do(t, submitReq("key-2", body("second"), header("X-Correlation-Id", "order-42")))
		wantStatus(t, resp, http.StatusAccepted)
		id2 := view(t, resp).TaskID
		if c := view(t, resp).CorrelationID; c != "order-42" || resp.Headers["X-Correlation-Id"] != "order-42" {
			t.Fatalf("correlation id %q", c)
		}

		// Exactly one message per new task, none for the replay or the 422.
		counts, corr := drainQueue(t, e)
		if len(counts) != 2 || counts[id] != 1 || counts[id2] != 1 {
			t.Fatalf("queue messages %v, want one each for %s and %s", counts, id, id2)
		}
		if corr[id] != id || corr[id2] != "order-42" {
			t.Fatalf("correlation attributes %v", corr)
		}
		if n := len(scanTasks(t, e)); n != 2 {
			t.Fatalf("%d items in the table, want 2", n)
		}
		if !strings.Contains(b.metrics.String(), `"TaskAccepted":1`) || !strings.Contains(b.metrics.String(), `"TaskReplayed":1`) {
			t.Fatalf("metrics %s", b.metrics.String())
		}
		if strings.Contains(b.logs.String(), "haiku") {
			t.Fatalf("task text in the logs: %s", b.logs.String())
		}
	})
}

// TestSubmitRejects covers the 400/413/415 rows: each writes nothing.
func TestSubmitRejects(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", api.MaxInput)
	cases := []struct {
		name   string
		req    func() (string, string, []reqOpt) // key, body, options
		status int
		typ    string
		field  string
		detail string
	}{
		{"missing key", func() (string, string, []reqOpt) { return "", body("x"), nil }, 400, api.TypeIdempotencyKeyMissing, "Idempotency-Key", ""},
		{"empty key", func() (string, string, []reqOpt) { return "", body("x"), []reqOpt{header("Idempotency-Key", "")} }, 400, api.TypeIdempotencyKeyMissing, "Idempotency-Key", ""},
		{"key too long", func() (string, string, []reqOpt) { return strings.Repeat("k", 256), body("x"), nil }, 400, api.TypeIdempotencyKeyInvalid, "Idempotency-Key", "1-255"},
		{"key control char", func() (string, string, []reqOpt) { return "a\x01b", body("x"), nil }, 400, api.TypeIdempotencyKeyInvalid, "Idempotency-Key", ""},
		{"key non-ascii", func() (string, string, []reqOpt) { return "ключ", body("x"), nil }, 400, api.TypeIdempotencyKeyInvalid, "Idempotency-Key", ""},
		{"key leading space", func() (string, string, []reqOpt) { return " k", body("x"), nil }, 400, api.TypeIdempotencyKeyInvalid, "Idempotency-Key", ""},
		{"bad correlation id", func() (string, string, []reqOpt) {
			return "k", body("x"), []reqOpt{header("X-Correlation-Id", strings.Repeat("c", 129))}
		}, 400, api.TypeCorrelationIDInvalid, "X-Correlation-Id", ""},
		{"malformed json", func() (string, string, []reqOpt) { return "k", `{"kind":"generate",`, nil }, 400, api.TypeMalformedJSON, "", "not valid JSON"},
		{"trailing data", func() (string, string, []reqOpt) { return "k", body("x") + "{}", nil }, 400, api.TypeMalformedJSON, "", ""},
		{"not utf-8", func() (string, string, []reqOpt) {
			return "k", "{\"kind\":\"generate\",\"input\":{\"prompt\":\"\xff\"}}", nil
		}, 400, api.TypeMalformedJSON, "", "UTF-8"},
		{"array body", func() (string, string, []reqOpt) { return "k", `[` + body("x") + `]`, nil }, 400, api.TypeInvalidBody, "", "JSON object"},
		{"unknown field", func() (string, string, []reqOpt) {
			return "k", `{"kind":"generate","input":{"prompt":"x"},"priority":1}`, nil
		}, 400, api.TypeInvalidBody, "priority", `Unknown field "priority"`},
		{"duplicate field", func() (string, string, []reqOpt) {
			return "k", `{"kind":"generate","kind":"generate","input":{"prompt":"x"}}`, nil
		}, 400, api.TypeInvalidBody, "kind", "more than once"},
		{"missing kind", func() (string, string, []reqOpt) { return "k", `{"input":{"prompt":"x"}}`, nil }, 400, api.TypeInvalidBody, "kind", "required"},
		{"unknown kind", func() (string, string, []reqOpt) { return "k", `{"kind":"summarise","input":{"prompt":"x"}}`, nil }, 400, api.TypeInvalidBody, "kind", `"generate"`},
		{"missing input", func() (string, string, []reqOpt) { return "k", `{"kind":"generate"}`, nil }, 400, api.TypeInvalidBody, "input", "required"},
		{"input not object", func() (string, string, []reqOpt) { return "k", `{"kind":"generate","input":"hi"}`, nil }, 400, api.TypeInvalidBody, "input", "JSON object"},
		{"blank prompt", func() (string, string, []reqOpt) { return "k", `{"kind":"generate","input":{"prompt":"  "}}`, nil }, 400, api.TypeInvalidInput, "input.prompt", "blank"},
		{"unknown input field", func() (string, string, []reqOpt) {
			return "k", `{"kind":"generate","input":{"prompt":"x","top_p":1}}`, nil
		}, 400, api.TypeInvalidInput, "input", `unknown field "top_p"`},
		{"max_tokens out of range", func() (string, string, []reqOpt) {
			return "k", `{"kind":"generate","input":{"prompt":"x","max_tokens":9000}}`, nil
		}, 400, api.TypeInvalidInput, "input.max_tokens", "8192"},
		{"body over cap", func() (string, string, []reqOpt) {
			return "k", `{"kind":"generate","input":{"prompt":"` + strings.Repeat("x", api.MaxBody) + `"}}`, nil
		}, 413, api.TypeBodyTooLarge, "", "65536"},
		{"base64 body over cap", func() (string, string, []reqOpt) {
			enc := base64.StdEncoding.EncodeToString([]byte(body(strings.Repeat("x", api.MaxBody))))
			return "k", enc, []reqOpt{func(r *eventsReq) { r.IsBase64Encoded = true }}
		}, 413, api.TypeBodyTooLarge, "", ""},
		{"input over cap", func() (string, string, []reqOpt) { return "k", body(big), nil }, 413, api.TypeInputTooLarge, "input", "32768"},
		{"not json", func() (string, string, []reqOpt) {
			return "k", body("x"), []reqOpt{header("Content-Type", "text/plain")}
		}, 415, api.TypeUnsupportedMediaType, "Content-Type", ""},
		{"no content type", func() (string, string, []reqOpt) { return "k", body("x"), []reqOpt{noHeader("Content-Type")} }, 415, api.TypeUnsupportedMediaType, "Content-Type", ""},
		{"latin-1", func() (string, string, []reqOpt) {
			return "k", body("x"), []reqOpt{header("Content-Type", "application/json; charset=iso-8859-1")}
		}, 415, api.TypeUnsupportedMediaType, "Content-Type", ""},
	}
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				key, bd, opts := tc.req()
				resp := b.do(t, submitReq(key, bd, opts...))
				p := wantProblem(t, resp, tc.status, tc.typ)
				if p.Field != tc.field {
					t.Errorf("field = %q, want %q (%s)", p.Field, tc.field, resp.Body)
				}
				if !strings.Contains(p.Detail, tc.detail) {
					t.Errorf("detail %q does not mention %q", p.Detail, tc.detail)
				}
				if p.Title == "" || resp.Headers["Cache-Control"] != "no-store" {
					t.Errorf("problem %+v headers %v", p, resp.Headers)
				}
			})
		}
		// Accepted with charset=utf-8 and with base64 (as API Gateway may send).
		resp := b.do(t, submitReq("utf8", body("x"), header("Content-Type", "application/json; charset=UTF-8")))
		wantStatus(t, resp, http.StatusAccepted)
		resp = b.do(t, submitReq("b64", base64.StdEncoding.EncodeToString([]byte(body("x"))), func(r *eventsReq) { r.IsBase64Encoded = true }))
		wantStatus(t, resp, http.StatusAccepted)
		if n := len(scanTasks(t, e)); n != 2 {
			t.Fatalf("%d items in the table, want only the 2 accepted", n)
		}
		if counts, _ := drainQueue(t, e); len(counts) != 2 {
			t.Fatalf("queue %v, want 2 messages", counts)
		}
	})
}

// TestGetAndCancel covers GET /tasks/{id} and POST /tasks/{id}/cancel in
// every state that matters.
func TestGetAndCancel(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		submit := func(key string) string {
			resp := b.do(t, submitReq(key, body("p-"+key)))
			wantStatus(t, resp, http.StatusAccepted)
			return view(t, resp).TaskID
		}

		// GET: 200, and 404 for unknown ids, malformed ids and other callers.
		id := submit("g1")
		resp := b.do(t, getReq(id))
		wantStatus(t, resp, http.StatusOK)
		if v := view(t, resp); v.TaskID != id || v.State != "queued" {
			t.Fatalf("view %+v", v)
		}
		wantProblem(t, b.do(t, getReq(ledger.TaskID(api.Anonymous, "never-used"))), 404, api.TypeNotFound)
		wantProblem(t, b.do(t, getReq("not-a-task-id")), 404, api.TypeNotFound)
		wantProblem(t, b.do(t, getReq(id, asJWT("mallory"))), 404, api.TypeNotFound)
		wantProblem(t, b.do(t, cancelReq(id, asJWT("mallory"))), 404, api.TypeNotFound)
		wantProblem(t, b.do(t, cancelReq(ledger.TaskID(api.Anonymous, "never-used"))), 404, api.TypeNotFound)

		// cancel queued: 200, then again 200 (unchanged).
		resp = b.do(t, cancelReq(id))
		wantStatus(t, resp, http.StatusOK)
		if v := view(t, resp); v.State != "cancelled" {
			t.Fatalf("cancelled view %+v", v)
		}
		resp = b.do(t, cancelReq(id))
		wantStatus(t, resp, http.StatusOK)
		if view(t, resp).State != "cancelled" {
			t.Fatal("cancel of a cancelled task changed it")
		}

		// running: 202, the attempt fenced; the task is unknown
		// (cancel_requested) until the reconciler settles it; a repeated
		// cancel answers the same.
		running := submit("g2r")
		rc, err := b.l.Claim(ctx, running, ledger.ClaimOptions{Owner: "test", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		resp = b.do(t, getReq(running))
		if v := view(t, resp); v.State != "running" || v.Attempts != 1 {
			t.Fatalf("running view %+v", v)
		}
		for range 2 {
			resp = b.do(t, cancelReq(running))
			wantStatus(t, resp, http.StatusAccepted)
			if v := view(t, resp); v.State != "unknown" || v.Error == nil || v.Error.Class != ledger.ErrorCancelRequested {
				t.Fatalf("cancel of a running task: %s", resp.Body)
			}
		}
		if cur, err := b.l.Get(ctx, running); err != nil || cur.AssignmentVersion != rc.AssignmentVersion+1 || cur.CancelVersion != rc.AssignmentVersion {
			t.Fatalf("after the cancel: %+v, %v; want the fencing token bumped once and cancel_version %d", cur, err, rc.AssignmentVersion)
		}

		run := submit("g2")
		claimed, err := b.l.Claim(ctx, run, ledger.ClaimOptions{Owner: "test", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}

		// retry_wait: the error is shown; cancel is 200.
		if _, err := b.l.ScheduleRetry(ctx, run, claimed.AssignmentVersion, time.Now().Add(time.Hour), "transient", "provider returned 503"); err != nil {
			t.Fatal(err)
		}
		resp = b.do(t, getReq(run))
		if v := view(t, resp); v.State != "retry_wait" || v.Error == nil || v.Error.Class != "transient" || v.Error.Message != "provider returned 503" {
			t.Fatalf("retry_wait view %+v", v)
		}
		resp = b.do(t, cancelReq(run))
		wantStatus(t, resp, http.StatusOK)
		if view(t, resp).State != "cancelled" {
			t.Fatalf("cancel from retry_wait: %s", resp.Body)
		}

		// completed: result as JSON, receipt; cancel is 409.
		done := submit("g3")
		c, err := b.l.Claim(ctx, done, ledger.ClaimOptions{Owner: "test", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Complete(ctx, done, c.AssignmentVersion, ledger.Completion{Result: `{"text":"ok","tokens":3}`, Provider: "simulated", ProviderRef: "sim-123"}); err != nil {
			t.Fatal(err)
		}
		resp = b.do(t, getReq(done))
		v := view(t, resp)
		var result map[string]any
		if err := json.Unmarshal(v.Result, &result); err != nil || result["text"] != "ok" {
			t.Fatalf("result %s: %v", v.Result, err)
		}
		if v.State != "completed" || v.Receipt.Provider != "simulated" || v.Receipt.ProviderRef != "sim-123" || v.Receipt.CompletedAt == "" || v.Error != nil {
			t.Fatalf("completed view %+v", v)
		}
		wantProblem(t, b.do(t, cancelReq(done)), 409, api.TypeStateConflict)

		// needs_review: the review item is shown.
		parked := submit("g4")
		c, err = b.l.Claim(ctx, parked, ledger.ClaimOptions{Owner: "test", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Park(ctx, c, ledger.ParkOptions{State: ledger.StateRunning, Version: c.AssignmentVersion}, ledger.Review{
			Reason: ledger.ReviewProviderConfig, Summary: "The provider rejected our credentials.",
			Known: []string{"the provider answered 403"}, Uncertain: []string{}, SafeActions: []string{"fix credentials, then retry"},
		}); err != nil {
			t.Fatal(err)
		}
		resp = b.do(t, getReq(parked))
		v = view(t, resp)
		if v.State != "needs_review" || v.Review == nil || v.Review.Reason != ledger.ReviewProviderConfig ||
			len(v.Review.Known) != 1 || len(v.Review.SafeActions) != 1 || v.Review.Uncertain == nil {
			t.Fatalf("needs_review view %+v (%s)", v, resp.Body)
		}
		p := wantProblem(t, b.do(t, cancelReq(parked)), 409, api.TypeStateConflict)
		if p.State != "needs_review" || p.TaskID != parked {
			t.Fatalf("409 state %q", p.State)
		}
	})
}

// TestRegenerate covers POST /tasks/{id}/regenerate.
func TestRegenerate(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		resp := b.do(t, submitReq("parent", `{"kind":"generate","input":{"prompt":"`+prompt+`","max_tokens":64}}`))
		wantStatus(t, resp, http.StatusAccepted)
		parent := view(t, resp).TaskID

		// Inherits the parent's input: no body at all.
		resp = b.do(t, regenReq(parent, "regen-1", ""))
		wantStatus(t, resp, http.StatusAccepted)
		child := view(t, resp)
		if child.ParentTaskID != parent || child.TaskID == parent || child.Kind != "generate" || child.State != "queued" ||
			resp.Headers["Location"] != "/tasks/"+child.TaskID {
			t.Fatalf("child %+v headers %v", child, resp.Headers)
		}
		pt, _ := b.l.Get(ctx, parent)
		ct, _ := b.l.Get(ctx, child.TaskID)
		if ct.Input != pt.Input || ct.ParentTaskID != parent || ct.PayloadSHA256 == pt.PayloadSHA256 {
			t.Fatalf("child stored %+v, parent %+v", ct, pt)
		}

		// Replay (same key, empty body and {} are the same payload): 200.
		resp = b.do(t, regenReq(parent, "regen-1", "{}"))
		wantStatus(t, resp, http.StatusOK)
		if resp.Headers[api.HeaderIdempotentReplayed] != "true" || view(t, resp).TaskID != child.TaskID {
			t.Fatalf("regenerate replay %v %s", resp.Headers, resp.Body)
		}
		// Same key, new input: 422.
		wantProblem(t, b.do(t, regenReq(parent, "regen-1", `{"input":{"prompt":"other"}}`)), 422, api.TypeIdempotencyKeyReused)
		// The parent's own key reused for a regenerate: 422 (the payload names a parent).
		wantProblem(t, b.do(t, regenReq(parent, "parent", "")), 422, api.TypeIdempotencyKeyReused)

		// New input given.
		resp = b.do(t, regenReq(parent, "regen-2", `{"input":{"prompt":"A limerick instead."}}`, header("X-Correlation-Id", "regen-corr")))
		wantStatus(t, resp, http.StatusAccepted)
		c2 := view(t, resp)
		stored, _ := b.l.Get(ctx, c2.TaskID)
		if stored.Input != `{"prompt":"A limerick instead."}` || c2.CorrelationID != "regen-corr" || c2.ParentTaskID != parent {
			t.Fatalf("regenerate with input: %+v / %+v", stored, c2)
		}

		// Errors.
		wantProblem(t, b.do(t, regenReq(parent, "", "")), 400, api.TypeIdempotencyKeyMissing)
		wantProblem(t, b.do(t, regenReq(parent, "regen-3", `{"kind":"generate"}`)), 400, api.TypeInvalidBody)
		wantProblem(t, b.do(t, regenReq(parent, "regen-3", `{"input":{"prompt":""}}`)), 400, api.TypeInvalidInput)
		wantProblem(t, b.do(t, regenReq(parent, "regen-3", `{"input":{}}`, header("Content-Type", "text/plain"))), 415, api.TypeUnsupportedMediaType)
		wantProblem(t, b.do(t, regenReq(parent, "regen-3", "", asJWT("mallory"))), 404, api.TypeNotFound)
		wantProblem(t, b.do(t, regenReq(ledger.TaskID(api.Anonymous, "nobody"), "regen-3", "")), 404, api.TypeNotFound)

		// Regenerating a cancelled parent is allowed (a new task, not a retry).
		wantStatus(t, b.do(t, cancelReq(parent)), http.StatusOK)
		wantStatus(t, b.do(t, regenReq(parent, "regen-4", "")), http.StatusAccepted)
		if got, _ := b.l.Get(ctx, parent); got.State != ledger.StateCancelled {
			t.Fatalf("regenerate changed the parent: %s", got.State)
		}

		counts, _ := drainQueue(t, e)
		if len(counts) != 4 {
			t.Fatalf("queue %v, want 4 new tasks (parent + 3 children)", counts)
		}
		for id, n := range counts {
			if n != 1 {
				t.Fatalf("task %s got %d messages", id, n)
			}
		}
		if n := len(scanTasks(t, e)); n != 4 {
			t.Fatalf("%d tasks in the table, want 4", n)
		}
	})
}

// TestCallerScope: another caller's task is 404, another caller's reuse of a
// key is their own task, and an authorizer without identity is 401.
func TestCallerScope(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		alice := b.do(t, submitReq("shared-key", body("alice's"), asJWT("alice")))
		wantStatus(t, alice, http.StatusAccepted)
		aliceID := view(t, alice).TaskID
		if aliceID != ledger.TaskID("jwt:alice", "shared-key") {
			t.Fatalf("alice's task id %s", aliceID)
		}
		// Bob, same key, another payload: his own task, not a 422.
		bob := b.do(t, submitReq("shared-key", body("bob's"), asJWT("bob")))
		wantStatus(t, bob, http.StatusAccepted)
		bobID := view(t, bob).TaskID
		if bobID == aliceID {
			t.Fatal("bob got alice's task")
		}
		// Same key and payload as alice, by an IAM caller: also its own.
		iam := b.do(t, submitReq("shared-key", body("alice's"), asIAM("arn:aws:iam::123456789012:user/carol", "AIDA123")))
		wantStatus(t, iam, http.StatusAccepted)
		if view(t, iam).TaskID != ledger.TaskID("iam:arn:aws:iam::123456789012:user/carol", "shared-key") {
			t.Fatalf("iam task %s", view(t, iam).TaskID)
		}
		callerOnly := b.do(t, submitReq("k", body("x"), asIAM("", "AROAXYZ:session")))
		wantStatus(t, callerOnly, http.StatusAccepted)
		if view(t, callerOnly).TaskID != ledger.TaskID("iam:AROAXYZ", "k") {
			t.Fatal("IAM role id (less the caller-chosen session) not used without an ARN")
		}

		wantStatus(t, b.do(t, getReq(aliceID, asJWT("alice"))), http.StatusOK)
		wantProblem(t, b.do(t, getReq(aliceID, asJWT("bob"))), 404, api.TypeNotFound)
		wantProblem(t, b.do(t, getReq(aliceID)), 404, api.TypeNotFound) // anonymous
		wantProblem(t, b.do(t, regenReq(aliceID, "r", "", asJWT("bob"))), 404, api.TypeNotFound)
		wantProblem(t, b.do(t, cancelReq(aliceID, asJWT("bob"))), 404, api.TypeNotFound)
		if got, _ := b.l.Get(context.Background(), aliceID); got.State != ledger.StateQueued {
			t.Fatalf("bob's cancel changed alice's task: %s", got.State)
		}

		// An authorizer context that names nobody.
		wantProblem(t, b.do(t, submitReq("k2", body("x"), asJWT(""))), 401, api.TypeUnauthenticated)
		wantProblem(t, b.do(t, getReq(aliceID, asIAM("", ""))), 401, api.TypeUnauthenticated)
		if n := len(scanTasks(t, e)); n != 4 {
			t.Fatalf("%d tasks, want 4", n)
		}
	})
}

// TestRouting: unknown paths 404, wrong methods 405 with Allow, stage
// prefixes kept in Location.
func TestRouting(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		raw := func(method, path, body string, opts ...reqOpt) eventsReq {
			r := newReq(method, "", path, "", body, opts...)
			r.RouteKey, r.RequestContext.RouteKey, r.PathParameters = "$default", "$default", nil
			return r
		}
		wantProblem(t, b.do(t, raw("GET", "/nothing", "")), 404, api.TypeNotFound)
		wantProblem(t, b.do(t, raw("GET", "/tasks/a/b/c", "")), 404, api.TypeNotFound)
		p := b.do(t, raw("DELETE", "/tasks/t_aaaaaaaaaaaaaaaaaaaaaaaaaa", ""))
		wantProblem(t, p, 405, api.TypeMethodNotAllowed)
		if p.Headers["Allow"] != "GET, OPTIONS" {
			t.Fatalf("Allow = %q", p.Headers["Allow"])
		}
		// /tasks takes GET (the caller's list) and POST (a submit).
		wantStatus(t, b.do(t, raw("GET", "/tasks", "")), http.StatusOK)
		p = b.do(t, raw("DELETE", "/tasks", ""))
		wantProblem(t, p, 405, api.TypeMethodNotAllowed)
		if p.Headers["Allow"] != "GET, POST, OPTIONS" {
			t.Fatalf("Allow = %q", p.Headers["Allow"])
		}

		// $default route (no route key): matched by path.
		resp := b.do(t, raw("POST", "/tasks", body("x"), header("Idempotency-Key", "route-1")))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID
		wantStatus(t, b.do(t, raw("GET", "/tasks/"+id, "")), http.StatusOK)

		// A named stage prefixes rawPath; Location keeps it.
		staged := raw("POST", "/prod/tasks", body("y"), header("Idempotency-Key", "route-2"))
		staged.RequestContext.Stage = "prod"
		r, err := b.h.Handle(context.Background(), staged)
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, r, http.StatusAccepted)
		if want := "/prod/tasks/" + view(t, r).TaskID; r.Headers["Location"] != want {
			t.Fatalf("Location %q, want %q", r.Headers["Location"], want)
		}
		// A route key API Gateway matched under a custom domain base path.
		based := submitReq("route-3", body("z"))
		based.RawPath = "/v1/tasks"
		r, _ = b.h.Handle(context.Background(), based)
		wantStatus(t, r, http.StatusAccepted)
		if want := "/v1/tasks/" + view(t, r).TaskID; r.Headers["Location"] != want {
			t.Fatalf("Location %q, want %q", r.Headers["Location"], want)
		}
	})
}

func TestCORS(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		// Allowed origin on an actual request.
		resp := b.do(t, submitReq("cors-1", body("x"), header("Origin", "https://app.example.com")))
		wantStatus(t, resp, http.StatusAccepted)
		if resp.Headers["Access-Control-Allow-Origin"] != "https://app.example.com" ||
			!strings.Contains(resp.Headers["Vary"], "Origin") ||
			!strings.Contains(resp.Headers["Access-Control-Expose-Headers"], "Location") ||
			!strings.Contains(resp.Headers["Access-Control-Expose-Headers"], "Idempotent-Replayed") {
			t.Fatalf("allowed origin headers %v", resp.Headers)
		}
		// Problems carry CORS headers too, so a browser can read them.
		resp = b.do(t, submitReq("", body("x"), header("Origin", "http://localhost:8080")))
		if resp.StatusCode != 400 || resp.Headers["Access-Control-Allow-Origin"] != "http://localhost:8080" {
			t.Fatalf("problem without CORS: %v", resp.Headers)
		}
		// Denied origin: served, but no CORS grant.
		resp = b.do(t, getReq(view(t, b.do(t, submitReq("cors-1", body("x")))).TaskID, header("Origin", "https://evil.example")))
		wantStatus(t, resp, http.StatusOK)
		if _, ok := resp.Headers["Access-Control-Allow-Origin"]; ok || !strings.Contains(resp.Headers["Vary"], "Origin") {
			t.Fatalf("denied origin headers %v", resp.Headers)
		}

		preflight := func(path, origin, method string) eventsReq {
			r := newReq("OPTIONS", "", path, "", "", header("Origin", origin), header("Access-Control-Request-Method", method),
				header("Access-Control-Request-Headers", "content-type,idempotency-key"))
			r.RouteKey, r.RequestContext.RouteKey = "$default", "$default"
			return r
		}
		resp = b.do(t, preflight("/tasks", "http://localhost:8080", "POST"))
		wantStatus(t, resp, http.StatusNoContent)
		if resp.Headers["Access-Control-Allow-Origin"] != "http://localhost:8080" || resp.Headers["Access-Control-Allow-Methods"] != "GET, POST, OPTIONS" ||
			resp.Headers["Access-Control-Allow-Headers"] != api.CORSAllowHeaders || resp.Headers["Access-Control-Max-Age"] != "600" || resp.Body != "" {
			t.Fatalf("preflight %v %q", resp.Headers, resp.Body)
		}
		for _, h := range []string{"idempotency-key", "x-correlation-id", "authorization", "content-type"} {
			if !strings.Contains(resp.Headers["Access-Control-Allow-Headers"], h) {
				t.Fatalf("preflight does not allow %s", h)
			}
		}
		resp = b.do(t, preflight("/tasks/t_aaaaaaaaaaaaaaaaaaaaaaaaaa/cancel", "https://app.example.com", "POST"))
		wantStatus(t, resp, http.StatusNoContent)
		resp = b.do(t, preflight("/tasks/t_aaaaaaaaaaaaaaaaaaaaaaaaaa", "https://app.example.com", "GET"))
		if resp.StatusCode != 204 || resp.Headers["Access-Control-Allow-Methods"] != "GET, OPTIONS" {
			t.Fatalf("GET preflight %d %v", resp.StatusCode, resp.Headers)
		}
		resp = b.do(t, preflight("/tasks", "https://evil.example", "POST"))
		wantProblem(t, resp, http.StatusForbidden, api.TypeOriginNotAllowed)
		if _, ok := resp.Headers["Access-Control-Allow-Origin"]; ok {
			t.Fatalf("denied preflight granted: %v", resp.Headers)
		}
		wantProblem(t, b.do(t, preflight("/elsewhere", "http://localhost:8080", "POST")), 404, api.TypeNotFound)

		// "*" allows any origin; no list disables CORS.
		b.h.AllowedOrigins = api.ParseOrigins(" * ")
		resp = b.do(t, preflight("/tasks", "https://anyone.example", "POST"))
		if resp.StatusCode != 204 || resp.Headers["Access-Control-Allow-Origin"] != "*" {
			t.Fatalf("wildcard preflight %d %v", resp.StatusCode, resp.Headers)
		}
		b.h.AllowedOrigins = nil
		resp = b.do(t, submitReq("cors-2", body("x"), header("Origin", "http://localhost:8080")))
		if _, ok := resp.Headers["Access-Control-Allow-Origin"]; ok {
			t.Fatalf("CORS header without an allow-list: %v", resp.Headers)
		}
	})
}

func TestParseOrigins(t *testing.T) {
	t.Parallel()
	got := fmt.Sprint(api.ParseOrigins(" https://a.example/ ,, http://localhost:8080,*"))
	if got != "[https://a.example http://localhost:8080 *]" {
		t.Fatalf("ParseOrigins = %s", got)
	}
	if api.ParseOrigins("") != nil {
		t.Fatal("empty list not nil")
	}
}

// TestSubmitCallBudget: the happy path is the watch item's PutItem, one
// conditional PutItem of the task and one SendMessage (DESIGN §9); a
// replay is the same two PutItems (the watch item is put before the
// task's conditional put finds the replay) and the DeleteItem of that
// watch item, plus the kumo fallback read where the engine omits ALL_OLD,
// and no send.
func TestSubmitCallBudget(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		e.Counter.Reset()
		wantStatus(t, b.do(t, submitReq("budget", body("x"))), http.StatusAccepted)
		if got := fmt.Sprint(e.Counter.Calls()); got != "map[DynamoDB.PutItem:2 SQS.SendMessage:1]" {
			t.Fatalf("submit made %s", got)
		}
		e.Counter.Reset()
		wantStatus(t, b.do(t, submitReq("budget", body("x"))), http.StatusOK)
		calls := e.Counter.Calls()
		if calls["DynamoDB.PutItem"] != 2 || calls["DynamoDB.DeleteItem"] != 1 || calls["SQS.SendMessage"] != 0 || calls["DynamoDB.GetItem (stand-in for ALL_OLD)"] > 1 || len(calls) > 3 {
			t.Fatalf("replay made %v", calls)
		}
	})
}
