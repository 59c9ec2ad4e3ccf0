package api_test

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

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/testenv"
)

func uploadReq(body string, opts ...reqOpt) eventsReq {
	return newReq(http.MethodPost, "/uploads", "/uploads", "", body, opts...)
}

func declare(id string, doc []byte, contentType string) string {
	m := map[string]any{"sha256": payload.Digest(doc), "size": len(doc), "content_type": contentType}
	if id != "" {
		m["upload_id"] = id
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// putUpload sends doc to a presigned upload the way a browser does.
func putUpload(t *testing.T, u api.UploadView, doc []byte) {
	t.Helper()
	req, err := http.NewRequest(u.Method, u.URL, bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range u.Headers {
		if http.CanonicalHeaderKey(k) != "Content-Length" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT to the presigned URL: %d %s", resp.StatusCode, msg)
	}
}

func uploadView(t *testing.T, resp events.APIGatewayV2HTTPResponse) api.UploadView {
	t.Helper()
	wantStatus(t, resp, http.StatusCreated)
	var u api.UploadView
	if err := json.Unmarshal([]byte(resp.Body), &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// docBody is a generate submit naming upload ids.
func docBody(prompt string, ids ...string) string {
	docs := make([]map[string]string, len(ids))
	for i, id := range ids {
		docs[i] = map[string]string{"upload_id": id}
	}
	b, _ := json.Marshal(map[string]any{"kind": "generate", "input": map[string]any{"prompt": prompt}, "documents": docs})
	return string(b)
}

// TestUploadDeclaration: POST /uploads answers 201 with a presigned PUT
// (server-chosen id when none is given; a repeat of the same declaration
// is a fresh URL), and refuses bad declarations with specific problems,
// recording nothing.
func TestUploadDeclaration(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		doc := []byte("%PDF-1.7 quarterly figures")

		u := uploadView(t, b.do(t, uploadReq(declare("", doc, "application/pdf"))))
		if !strings.HasPrefix(u.UploadID, "up_") || u.Method != http.MethodPut || u.URL == "" || u.Headers["X-Amz-Checksum-Sha256"] == "" || u.ExpiresAt == "" {
			t.Fatalf("upload view %+v", u)
		}
		u1 := uploadView(t, b.do(t, uploadReq(declare("mine-1", doc, "application/pdf"))))
		if u1.UploadID != "mine-1" {
			t.Fatalf("upload id %q, want the caller's", u1.UploadID)
		}
		uploadView(t, b.do(t, uploadReq(declare("mine-1", doc, "application/pdf")))) // same declaration: fresh URL

		wantProblem(t, b.do(t, uploadReq(declare("mine-1", []byte("other bytes"), "application/pdf"))), http.StatusConflict, api.TypeUploadIDTaken)
		// Upload ids are per caller: another caller may use the same id
		// (even with other bytes) for its own upload.
		uploadView(t, b.do(t, uploadReq(declare("mine-1", []byte("other bytes"), "application/pdf"), asJWT("someone-else"))))

		big := fmt.Sprintf(`{"sha256":"%s","size":%d,"content_type":"image/png"}`, payload.Digest(doc), payload.MaxImageSize+1)
		if p := wantProblem(t, b.do(t, uploadReq(big)), http.StatusRequestEntityTooLarge, api.TypeDocumentTooLarge); !strings.Contains(p.Detail, "png") {
			t.Errorf("too-large detail does not name the format: %s", p.Detail)
		}
		wantProblem(t, b.do(t, uploadReq(declare("x1", doc, "application/zip"))), http.StatusUnsupportedMediaType, api.TypeUnsupportedDocument)
		for name, c := range map[string]struct{ body, field string }{
			"bad sha256":   {fmt.Sprintf(`{"sha256":"%s","size":3,"content_type":"text/plain"}`, strings.ToUpper(payload.Digest(doc))), "sha256"},
			"zero size":    {fmt.Sprintf(`{"sha256":"%s","size":0,"content_type":"text/plain"}`, payload.Digest(doc)), "size"},
			"bad id":       {fmt.Sprintf(`{"upload_id":"a/b","sha256":"%s","size":3,"content_type":"text/plain"}`, payload.Digest(doc)), "upload_id"},
			"unknown":      {fmt.Sprintf(`{"sha256":"%s","size":3,"content_type":"text/plain","name":"x"}`, payload.Digest(doc)), "name"},
			"missing type": {fmt.Sprintf(`{"sha256":"%s","size":3}`, payload.Digest(doc)), "content_type"},
		} {
			if p := wantProblem(t, b.do(t, uploadReq(c.body)), http.StatusBadRequest, api.TypeInvalidBody); p.Field != c.field {
				t.Errorf("%s: field %q, want %q", name, p.Field, c.field)
			}
		}
		wantProblem(t, b.do(t, uploadReq(declare("x2", doc, "text/plain"), header("Content-Type", "text/plain"))), http.StatusUnsupportedMediaType, api.TypeUnsupportedMediaType)
		// None of the refused declarations left an intent behind.
		for _, id := range []string{"x1", "x2"} {
			if _, err := st.Resolve(context.Background(), api.Anonymous, id); err == nil || !strings.Contains(err.Error(), "unknown upload") {
				t.Errorf("refused declaration %s recorded something: %v", id, err)
			}
		}

		// No payload bucket: a clear 501, for declarations and for submits
		// naming documents.
		nb := setup(t, e)
		wantProblem(t, nb.do(t, uploadReq(declare("", doc, "application/pdf"))), http.StatusNotImplemented, api.TypeUploadsNotConfigured)
		wantProblem(t, nb.do(t, submitReq("nb-1", docBody("read it", "mine-1"))), http.StatusNotImplemented, api.TypeUploadsNotConfigured)
	})
}

// TestSubmitWithDocuments: a generate task references uploaded documents.
// The upload is checked (Resolve) and copied to its content address
// before the item is written; the item keeps references only; the view
// shows them; the documents' hashes are part of the payload hash.
func TestSubmitWithDocuments(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		ctx := context.Background()
		doc := bytes.Repeat([]byte("col_a,col_b\n1,2\n"), 20000) // 320 KB: far over an item
		u := uploadView(t, b.do(t, uploadReq(declare("csv-1", doc, "text/csv"))))
		putUpload(t, u, doc)

		resp := b.do(t, submitReq("doc-1", docBody("summarise the table", "csv-1")))
		wantStatus(t, resp, http.StatusAccepted)
		v := view(t, resp)
		if len(v.Documents) != 1 || v.Documents[0] != (api.DocumentView{UploadID: "csv-1", SHA256: payload.Digest(doc), Size: int64(len(doc)), ContentType: "text/csv"}) {
			t.Fatalf("view documents %+v", v.Documents)
		}
		stored, err := b.l.Get(ctx, v.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		d := stored.Documents
		if len(d) != 1 || d[0].Ref.Key != payload.InputKey(payload.Digest(doc)) || d[0].Format != "csv" {
			t.Fatalf("stored documents %+v", d)
		}
		if got, err := st.Get(ctx, payload.Ref(d[0].Ref)); err != nil || !bytes.Equal(got, doc) {
			t.Fatalf("adopted copy: %d bytes, %v", len(got), err)
		}
		for _, it := range scanTasks(t, e) {
			raw, _ := json.Marshal(it)
			if len(raw) > 4096 {
				t.Fatalf("the task item carries %d bytes: documents must be kept by reference only", len(raw))
			}
		}
		// Dedup: the same key and the same document is the original task.
		resp = b.do(t, submitReq("doc-1", docBody("summarise the table", "csv-1")))
		wantStatus(t, resp, http.StatusOK)
		if view(t, resp).TaskID != v.TaskID || resp.Headers[api.HeaderIdempotentReplayed] != "true" {
			t.Fatalf("replay: %s", resp.Body)
		}
		// The same key with another version of the document: 422, nothing written.
		doc2 := append(bytes.Clone(doc), []byte("3,4\n")...)
		u2 := uploadView(t, b.do(t, uploadReq(declare("csv-2", doc2, "text/csv"))))
		putUpload(t, u2, doc2)
		wantProblem(t, b.do(t, submitReq("doc-1", docBody("summarise the table", "csv-2"))), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
		if again, _ := b.l.Get(ctx, v.TaskID); again.PayloadSHA256 != stored.PayloadSHA256 || again.Documents[0].UploadID != "csv-1" {
			t.Fatalf("the 422 changed the task: %+v", again.Documents)
		}
		// Without documents the same prompt has another hash too.
		wantProblem(t, b.do(t, submitReq("doc-1", body("summarise the table"))), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
		// A regenerate keeps the parent's documents.
		resp = b.do(t, regenReq(v.TaskID, "doc-regen", ""))
		wantStatus(t, resp, http.StatusAccepted)
		if cv := view(t, resp); len(cv.Documents) != 1 || cv.Documents[0].SHA256 != payload.Digest(doc) {
			t.Fatalf("regenerate documents %+v", cv.Documents)
		}
	})
}

// TestSubmitWithBadDocuments: every way a document can be unusable is a
// specific problem, and nothing is written. kumo and moto verify neither
// presigned signatures nor checksums, so the oversized and altered uploads
// here reach the bucket: Resolve at submit is what catches them.
func TestSubmitWithBadDocuments(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withDestinations(t))
		b.h.Payloads = st
		doc := []byte("# notes\nsome markdown")
		declared := func(id string) api.UploadView {
			return uploadView(t, b.do(t, uploadReq(declare(id, doc, "text/markdown"))))
		}
		declared("pending")
		putUpload(t, declared("longer"), append(bytes.Clone(doc), " and more"...))
		altered := bytes.Clone(doc)
		altered[0] = '!'
		putUpload(t, declared("altered"), altered)
		putUpload(t, declared("good"), doc)
		theirs := uploadView(t, b.do(t, uploadReq(declare("theirs", doc, "text/markdown"), asJWT("bob"))))
		putUpload(t, theirs, doc)

		cases := []struct {
			name, id, typ string
			status        int
		}{
			{"never declared", "nope", api.TypeUnknownUpload, http.StatusUnprocessableEntity},
			{"another caller's", "theirs", api.TypeUnknownUpload, http.StatusUnprocessableEntity},
			{"not uploaded yet", "pending", api.TypeUploadNotReceived, http.StatusConflict},
			{"oversized upload", "longer", api.TypeUploadMismatch, http.StatusUnprocessableEntity},
			{"altered bytes", "altered", api.TypeUploadMismatch, http.StatusUnprocessableEntity},
		}
		var unknown string
		for i, c := range cases {
			p := wantProblem(t, b.do(t, submitReq(fmt.Sprintf("bad-%d", i), docBody("read", "good", c.id))), c.status, c.typ)
			if p.Field != "documents[1].upload_id" {
				t.Errorf("%s: field %q", c.name, p.Field)
			}
			if c.typ == api.TypeUnknownUpload {
				if unknown != "" && p.Detail != unknown {
					t.Errorf("another caller's upload is told apart from a missing one: %q vs %q", p.Detail, unknown)
				}
				unknown = p.Detail
			}
		}
		for name, body := range map[string]string{
			"too many":    docBody("read", "a", "b", "c", "d", "e", "f"),
			"duplicate":   docBody("read", "good", "good"),
			"empty list":  `{"kind":"generate","input":{"prompt":"read"},"documents":[]}`,
			"bad item":    `{"kind":"generate","input":{"prompt":"read"},"documents":[{"id":"good"}]}`,
			"deliver doc": `{"kind":"deliver","input":{"destination":"publish","params":{"slug":"r-1"},"payload":{"title":"x"}},"documents":[{"upload_id":"good"}]}`,
		} {
			p := wantProblem(t, b.do(t, submitReq("bad-shape", body)), http.StatusBadRequest, api.TypeInvalidBody)
			if !strings.HasPrefix(p.Field, "documents") {
				t.Errorf("%s: field %q", name, p.Field)
			}
		}
		if n := len(scanTasks(t, e)); n != 0 {
			t.Fatalf("%d task(s) written by refused submits", n)
		}
		// The owner of "theirs" may use it.
		wantStatus(t, b.do(t, submitReq("bob-1", docBody("read", "theirs"), asJWT("bob"))), http.StatusAccepted)
		if tk, err := b.l.Get(context.Background(), b.l.TaskID("jwt:bob", "bob-1")); err != nil || len(tk.Documents) != 1 {
			t.Fatalf("bob's task: %+v %v", tk, err)
		}
	})
}

// TestDocumentReplayAfterUploadExpired: the upload and its declaration
// expire after a day (lifecycle), the task's copy under inputs/ stays. A
// replay of the same submit is still the original task (200); a new key
// naming the expired upload is unknown-upload.
func TestDocumentReplayAfterUploadExpired(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		ctx := context.Background()
		doc := []byte("<p>minutes</p>")
		putUpload(t, uploadView(t, b.do(t, uploadReq(declare("html-1", doc, "text/html")))), doc)
		resp := b.do(t, submitReq("exp-1", docBody("summarise", "html-1")))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID

		for _, key := range []string{payload.IntentKey(api.Anonymous, "html-1"), payload.UploadKey(api.Anonymous, "html-1")} {
			if _, err := e.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(e.Names.PayloadBucket), Key: aws.String(key)}); err != nil {
				t.Fatal(err)
			}
		}
		resp = b.do(t, submitReq("exp-1", docBody("summarise", "html-1")))
		wantStatus(t, resp, http.StatusOK)
		if v := view(t, resp); v.TaskID != id || len(v.Documents) != 1 {
			t.Fatalf("replay after expiry: %s", resp.Body)
		}
		wantProblem(t, b.do(t, submitReq("exp-2", docBody("summarise", "html-1"))), http.StatusUnprocessableEntity, api.TypeUnknownUpload)
		wantProblem(t, b.do(t, submitReq("exp-1", docBody("other prompt", "html-1"))), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
	})
}

// TestUploadWhenS3IsDown: the declaration put fails (5xx after the SDK's
// retries): 503 problem+json with Retry-After.
func TestUploadWhenS3IsDown(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(s3Down(t, e)))
		resp := b.do(t, uploadReq(declare("down-1", []byte("x"), "text/plain")))
		wantProblem(t, resp, http.StatusServiceUnavailable, api.TypeUnavailable)
		if resp.Headers["Retry-After"] == "" {
			t.Fatalf("503 without Retry-After: %v", resp.Headers)
		}
		resp = b.do(t, submitReq("down-2", docBody("read", "down-1")))
		wantProblem(t, resp, http.StatusServiceUnavailable, api.TypeUnavailable)
		if len(scanTasks(t, e)) != 0 {
			t.Fatal("a task was recorded although its document could not be resolved")
		}
	})
}
