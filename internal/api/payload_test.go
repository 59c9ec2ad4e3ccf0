package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func withPayloads(st *payload.Store) func(*option) {
	return withHandler(func(h *api.Handler) { h.Payloads = st })
}

// s3Down is a payload store whose every S3 call fails to send (after the
// SDK's retries).
func s3Down(t *testing.T, e *testenv.Env) *payload.Store {
	t.Helper()
	inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
		if c.Service == "S3" {
			return faultinject.SendFailure
		}
		return ""
	}))
	o := e.S3.Options()
	o.APIOptions = append(append(o.APIOptions[:0:0], o.APIOptions...), inj.Register)
	st, err := payload.New(s3.New(o), e.Names.PayloadBucket, payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func s3Calls(e *testenv.Env) int {
	n := 0
	for k, c := range e.Counter.Calls() {
		if strings.HasPrefix(k, "S3.") {
			n += c
		}
	}
	return n
}

// TestLargeInputClaimCheck: an input over the inline threshold is put in
// S3 (content-addressed) before the item, which keeps only the reference;
// the payload hash is the canonical request's, so a replay is a 200 and
// another payload under the key a 422 that writes nothing. A small input
// makes no S3 call. Regenerate reads the parent's offloaded input.
func TestLargeInputClaimCheck(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		ctx := context.Background()
		big := strings.Repeat("a long document about ledgers. ", 400) // ~12 KB

		resp := b.do(t, submitReq("big-1", body(big)))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID
		stored, err := b.l.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		canon, _ := json.Marshal(map[string]string{"prompt": big})
		wantHash, _ := api.PayloadSHA256("generate", json.RawMessage(canon), "")
		if stored.Input != "" || stored.InputRef == nil || stored.InputRef.Key != payload.InputKey(payload.Digest(canon)) ||
			stored.InputRef.Size != int64(len(canon)) || stored.PayloadSHA256 != wantHash {
			t.Fatalf("stored input %d bytes, ref %+v, hash %s; want only the reference to inputs/<sha256>, hash %s", len(stored.Input), stored.InputRef, stored.PayloadSHA256, wantHash)
		}
		got, err := st.Get(ctx, payload.Ref(*stored.InputRef))
		if err != nil || string(got) != string(canon) {
			t.Fatalf("object behind the reference: %q, %v", got, err)
		}

		// Replay: same payload, other whitespace.
		resp = b.do(t, submitReq("big-1", "{ \"kind\": \"generate\", \"input\": "+string(canon)+" }"))
		wantStatus(t, resp, http.StatusOK)
		if resp.Headers[api.HeaderIdempotentReplayed] != "true" || view(t, resp).TaskID != id {
			t.Fatalf("replay: %v %s", resp.Headers, resp.Body)
		}
		// Same key, other large payload: 422, nothing written.
		wantProblem(t, b.do(t, submitReq("big-1", body(big+"!"))), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
		if again, _ := b.l.Get(ctx, id); again.PayloadSHA256 != wantHash || *again.InputRef != *stored.InputRef {
			t.Fatalf("the 422 changed the task: %+v", again.InputRef)
		}

		// Regenerate inherits the offloaded input (read back, then placed
		// again under the same content address).
		resp = b.do(t, regenReq(id, "big-regen", ""))
		wantStatus(t, resp, http.StatusAccepted)
		child, _ := b.l.Get(ctx, view(t, resp).TaskID)
		if child.InputRef == nil || *child.InputRef != *stored.InputRef || child.Input != "" {
			t.Fatalf("child input ref %+v, want the parent's %+v", child.InputRef, stored.InputRef)
		}

		// A small input: inline, no S3 call at all.
		e.Counter.Reset()
		resp = b.do(t, submitReq("small-1", body(prompt)))
		wantStatus(t, resp, http.StatusAccepted)
		small, _ := b.l.Get(ctx, view(t, resp).TaskID)
		if small.InputRef != nil || small.Input == "" {
			t.Fatalf("small input offloaded: %+v", small.InputRef)
		}
		if n := s3Calls(e); n != 0 {
			t.Fatalf("small submit made %d S3 call(s): %v", n, e.Counter.Calls())
		}
	})
}

// TestTaskViewResolvesOffloadedResult: GET /tasks/{id} of a task completed
// with a result in S3 shows the result itself, with its size and SHA-256
// in the receipt (validated against the OpenAPI document).
func TestTaskViewResolvesOffloadedResult(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		ctx := context.Background()
		resp := b.do(t, submitReq("res-1", body(prompt)))
		id := view(t, resp).TaskID
		claimed, err := b.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "test", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		result, _ := json.Marshal(map[string]string{"text": strings.Repeat("word ", 3000)})
		v, err := st.PlaceResult(ctx, id, claimed.CreatedMs, claimed.AssignmentVersion, result)
		if err != nil || v.Ref == nil {
			t.Fatalf("place result: %+v %v", v, err)
		}
		ref := ledger.PayloadRef(*v.Ref)
		if _, err := b.l.Complete(ctx, id, claimed.AssignmentVersion, ledger.Completion{ResultRef: &ref, Provider: "simulated", ProviderRef: "r1"}); err != nil {
			t.Fatal(err)
		}
		resp = b.do(t, getReq(id))
		wantStatus(t, resp, http.StatusOK)
		tv := view(t, resp)
		if string(tv.Result) != string(result) {
			t.Fatalf("view result %d bytes, want the stored %d", len(tv.Result), len(result))
		}
		if tv.Receipt.ResultBytes != int64(len(result)) || tv.Receipt.ResultSHA256 != payload.Digest(result) {
			t.Fatalf("receipt %+v", tv.Receipt)
		}
	})
}

// TestSubmitWhenS3IsDown: the input put fails (5xx after the SDK's
// retries): 503 problem+json with Retry-After, and no task is recorded.
func TestSubmitWhenS3IsDown(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(s3Down(t, e)))
		resp := b.do(t, submitReq("down-1", body(strings.Repeat("x", 5000))))
		p := wantProblem(t, resp, http.StatusServiceUnavailable, api.TypeUnavailable)
		if resp.Headers["Retry-After"] == "" || !strings.Contains(p.Detail, "payload store") {
			t.Fatalf("503 without Retry-After or a clear detail: %v %s", resp.Headers, resp.Body)
		}
		if _, err := b.l.Get(context.Background(), ledger.TaskID(api.Anonymous, "down-1")); err == nil {
			t.Fatal("a task was recorded although its input could not be stored")
		}
		if len(scanTasks(t, e)) != 0 {
			t.Fatal("tasks table not empty")
		}
	})
}
