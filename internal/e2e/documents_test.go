package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// docStack is the submit handler and the worker over one Env, with the
// payload store on the Env's bucket.
type docStack struct {
	e      *testenv.Env
	l      *ledger.Ledger
	submit *api.Handler
	w      *worker.Handler
	sim    *simulated.Provider
}

func newDocStack(t *testing.T, e *testenv.Env) *docStack {
	t.Helper()
	ctx := context.Background()
	if _, err := e.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
		QueueUrl: aws.String(e.Names.TaskQueueURL), Attributes: map[string]string{"ReceiveMessageWaitTimeSeconds": "0"},
	}); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, WatchTable: e.Names.WatchTable})
	if err != nil {
		t.Fatal(err)
	}
	st := e.Payloads(t, 0)
	sim := simulated.New(simulated.Options{Seed: 1})
	return &docStack{
		e: e, l: l, sim: sim,
		submit: &api.Handler{Ledger: l, Dispatch: &dispatch.Sender{SQS: e.SQS, QueueURL: e.Names.TaskQueueURL}, Payloads: st},
		w:      &worker.Handler{Ledger: l, Provider: sim, SQS: e.SQS, QueueURL: e.Names.TaskQueueURL, Policy: retrypolicy.Default(), Payloads: st},
	}
}

func (s *docStack) call(t *testing.T, path, key, body string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	h := map[string]string{"content-type": "application/json"}
	if key != "" {
		h["idempotency-key"] = key
	}
	resp, _ := s.submit.Handle(context.Background(), events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST " + path, RawPath: path, Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: path}},
	})
	return resp
}

// upload declares doc with POST /uploads and PUTs it to the presigned URL
// with net/http, as a browser would.
func (s *docStack) upload(t *testing.T, doc []byte, contentType string) string {
	t.Helper()
	decl, _ := json.Marshal(map[string]any{"sha256": payload.Digest(doc), "size": len(doc), "content_type": contentType})
	resp := s.call(t, "/uploads", "", string(decl))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /uploads = %d %s", resp.StatusCode, resp.Body)
	}
	var u api.UploadView
	if err := json.Unmarshal([]byte(resp.Body), &u); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(u.Method, u.URL, bytes.NewReader(doc))
	for k, v := range u.Headers {
		if http.CanonicalHeaderKey(k) != "Content-Length" {
			req.Header.Set(k, v)
		}
	}
	put, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(put.Body)
	put.Body.Close()
	if put.StatusCode != http.StatusOK {
		t.Fatalf("PUT %d %s", put.StatusCode, msg)
	}
	return u.UploadID
}

func (s *docStack) submitWith(t *testing.T, key string, ids ...string) string {
	t.Helper()
	docs := make([]map[string]string, len(ids))
	for i, id := range ids {
		docs[i] = map[string]string{"upload_id": id}
	}
	b, _ := json.Marshal(map[string]any{"kind": "generate", "input": map[string]string{"prompt": "compare the documents"}, "documents": docs})
	resp := s.call(t, "/tasks", key, string(b))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit = %d %s", resp.StatusCode, resp.Body)
	}
	var v api.TaskView
	_ = json.Unmarshal([]byte(resp.Body), &v)
	return v.TaskID
}

func (s *docStack) work(t *testing.T, n int) {
	t.Helper()
	msgs := receive(t, s.e, 0)
	if len(msgs) != n {
		t.Fatalf("%d message(s) on the queue, want %d", len(msgs), n)
	}
	out, err := s.w.Handle(context.Background(), events.SQSEvent{Records: msgs})
	if err != nil || len(out.BatchItemFailures) != 0 {
		t.Fatalf("worker: %+v, %v", out, err)
	}
}

// TestDocumentsReachTheProvider: upload (POST /uploads, then a real HTTP
// PUT to the presigned URL), submit a generate task naming two documents,
// and the worker hands the provider the exact bytes: the simulated reply
// names the SHA-256 and size it computed over what it received.
func TestDocumentsReachTheProvider(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		s := newDocStack(t, e)
		csv := bytes.Repeat([]byte("region,revenue\nnorth,12\n"), 5000) // 120 KB
		png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0, 1, 2, 3}, 1000)...)
		id := s.submitWith(t, "docs-1", s.upload(t, csv, "text/csv"), s.upload(t, png, "image/png"))
		s.work(t, 1)

		got, err := s.l.Get(context.Background(), id)
		if err != nil || got.State != ledger.StateCompleted {
			t.Fatalf("task %+v, %v; want completed", got, err)
		}
		var out struct{ Text string }
		if err := json.Unmarshal([]byte(got.Result), &out); err != nil {
			t.Fatal(err)
		}
		for i, d := range []struct {
			b      []byte
			format string
		}{{csv, "csv"}, {png, "png"}} {
			want := fmt.Sprintf("[read document-%d %s sha256:%s bytes:%d]", i+1, d.format, payload.Digest(d.b), len(d.b))
			if !strings.Contains(out.Text, want) {
				t.Errorf("the provider's reply lacks %q: %.300s", want, out.Text)
			}
		}
		if n := s.sim.SideEffects(id); n != 1 {
			t.Fatalf("provider side effects %d, want 1", n)
		}
	})
}

// TestAlteredDocumentFailsWithoutACall: the adopted copy of a document is
// replaced by other bytes after the submit; the worker's verified read
// catches it, the task fails document_unavailable once (not a retry loop)
// and the provider is never called.
func TestAlteredDocumentFailsWithoutACall(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		s := newDocStack(t, e)
		ctx := context.Background()
		doc := []byte("# plan\nship it on friday")
		id := s.submitWith(t, "alt-1", s.upload(t, doc, "text/markdown"))
		task, err := s.l.Get(ctx, id)
		if err != nil || len(task.Documents) != 1 {
			t.Fatalf("task %+v, %v", task, err)
		}
		if _, err := e.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.Names.PayloadBucket), Key: aws.String(task.Documents[0].Ref.Key),
			Body: strings.NewReader("# plan\nship it on monday")}); err != nil {
			t.Fatal(err)
		}
		s.work(t, 1)
		got, _ := s.l.Get(ctx, id)
		if got.State != ledger.StateFailed || got.ErrorClass != worker.ErrorClassDocumentUnavailable || !strings.Contains(got.ErrorMessage, "does not match its reference") {
			t.Fatalf("task %s %s: %s; want failed %s naming the mismatch", got.State, got.ErrorClass, got.ErrorMessage, worker.ErrorClassDocumentUnavailable)
		}
		if n := s.sim.TotalSideEffects(); n != 0 {
			t.Fatalf("the provider was called %d time(s)", n)
		}
		if msgs := receive(t, e, 0); len(msgs) != 0 {
			t.Fatalf("%d message(s) left: the failure is not final", len(msgs))
		}
	})
}
