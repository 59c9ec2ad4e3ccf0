package soak

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Documents through the presigned upload flow (DESIGN §12, docs/payloads.md
// "Documents"): POST /uploads to the submit handler, a PUT of the bytes to
// the presigned URL with net/http (as a browser does: the emulator serves
// it, no SDK in between), then a submit naming the upload. The soak's
// document kinds and the bench's 1 MB document row both use these.

// DocumentType is the content type of the soak's and the bench's documents.
const DocumentType = "text/plain"

// Presigned is the answer of POST /uploads: the status, the problem type
// of a refusal, and the presigned PUT of a 201.
type Presigned struct {
	Status  int
	Problem string
	View    api.UploadView
}

// PresignDocument calls POST /uploads on h declaring uploadID ("" lets the
// server choose), the SHA-256 and size of doc, and contentType.
func PresignDocument(ctx context.Context, h *api.Handler, uploadID, contentType string, doc []byte) (Presigned, error) {
	sum := sha256.Sum256(doc)
	m := map[string]any{"sha256": hex.EncodeToString(sum[:]), "size": len(doc), "content_type": contentType}
	if uploadID != "" {
		m["upload_id"] = uploadID
	}
	body, _ := json.Marshal(m)
	resp, err := h.Handle(ctx, apiRequest(http.MethodPost, "/uploads", "", string(body)))
	if err != nil {
		return Presigned{}, err
	}
	p := Presigned{Status: resp.StatusCode, Problem: problemType(resp)}
	if resp.StatusCode == http.StatusCreated {
		if err := json.Unmarshal([]byte(resp.Body), &p.View); err != nil {
			return p, fmt.Errorf("soak: POST /uploads answered 201 with an unreadable body: %w", err)
		}
	}
	return p, nil
}

// PutDocument sends body to a presigned upload with exactly its headers
// (Content-Length is the body's, set by net/http).
func PutDocument(ctx context.Context, v api.UploadView, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, v.Method, v.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, val := range v.Headers {
		if http.CanonicalHeaderKey(k) != "Content-Length" {
			req.Header.Set(k, val)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("soak: PUT to the presigned URL: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("soak: PUT to the presigned URL answered %d: %.200s", resp.StatusCode, msg)
	}
	return nil
}

// DocumentSubmit is the body of a generate submit with input and the
// named uploads.
func DocumentSubmit(input string, uploadIDs ...string) string {
	docs := make([]map[string]string, len(uploadIDs))
	for i, id := range uploadIDs {
		docs[i] = map[string]string{"upload_id": id}
	}
	d, _ := json.Marshal(docs)
	return `{"kind":"generate","input":` + input + `,"documents":` + string(d) + `}`
}

// problemType is the "type" of a problem+json answer ("" otherwise).
func problemType(resp events.APIGatewayV2HTTPResponse) string {
	if resp.StatusCode < 400 {
		return ""
	}
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal([]byte(resp.Body), &p)
	return p.Type
}

// documentBytes is the deterministic text document of soak task i,
// version v (another version: other bytes, the same size): 5-12 KiB, above
// the 4 KiB item bound the checker holds a document task to, yet quick.
func documentBytes(i, v int) []byte {
	n := 5<<10 + (i*997)%(7<<10)
	var b bytes.Buffer
	b.WriteString("soak document " + strconv.Itoa(i) + " version " + strconv.Itoa(v) + "\n")
	for b.Len() < n {
		b.WriteString("a line of the document under review, " + strconv.Itoa(b.Len()) + "\n")
	}
	return b.Bytes()[:n]
}

func isDocument(k Kind) bool { return k == Document || k == DocumentAltered }

// docRecord is what the callers of a document task did and saw.
type docRecord struct {
	doc []byte // the document the accepted submit names
	// altered: DocumentAltered's altered bytes were PUT (the emulator
	// took them) and submitted; absentAfter: the task did not exist right
	// after that submit's answer.
	altered, absentAfter bool
}

// uploadID is the upload id of variant v of task t.
func uploadID(t *task, v string) string { return "soakdoc-" + t.key + "-" + v }

// wireDocuments builds the handler the document callers' repeats go
// through: the submit function's (every setting it has) on clients of
// their own counter, so that the report's per-task figures stay the
// pipeline's (as the approvers' decisions do).
func (s *soak) wireDocuments(lcfg ledger.Config) error {
	s.docReplayCalls = awsclient.NewCounter()
	faulty := s.env.AWS.Copy()
	faulty.APIOptions = append(append([]func(*middleware.Stack) error{}, s.env.AWS.APIOptions...), s.docReplayCalls.Register, s.replay.Register, s.inj.Register, s.lat.register)
	led, err := ledger.New(awsclient.DynamoDB(faulty), lcfg)
	if err != nil {
		return err
	}
	h := *s.submit
	h.Ledger = led
	h.Dispatch = &dispatch.Sender{SQS: awsclient.SQS(faulty), QueueURL: s.env.Names.TaskQueueURL}
	if s.submit.Payloads != nil {
		if h.Payloads, err = payload.New(awsclient.S3(faulty), s.env.Names.PayloadBucket, payload.Options{}); err != nil {
			return err
		}
	}
	s.docReplayer = &h
	return nil
}

// writeDocumentReplays prints the document callers' repeats line.
func (r *Report) writeDocumentReplays(w io.Writer) {
	if len(r.DocumentReplayCalls) == 0 {
		return
	}
	keys := make([]string, 0, len(r.DocumentReplayCalls))
	for k := range r.DocumentReplayCalls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.DocumentReplayCalls[k]))
	}
	fmt.Fprintf(w, "documents: the AWS calls of the document callers' repeats (the same submit again; another version uploaded and submitted; the altered upload and its refused submit), not in the figures above: %s\n", strings.Join(parts, ", "))
}

// presign declares doc under id through h, retrying a 5xx as a client
// would.
func (s *soak) presign(ctx context.Context, h *api.Handler, t *task, id string, doc []byte) (api.UploadView, bool) {
	for try := range maxSubmitTries {
		p, err := PresignDocument(ctx, h, id, DocumentType, doc)
		if err == nil && p.Status == http.StatusCreated {
			return p.View, true
		}
		if (err == nil && p.Status < 500) || !s.backoff(ctx, try) {
			s.note(t.kind, fmt.Sprintf("POST /uploads for %s answered %d %s (%v)", t.id, p.Status, p.Problem, err))
			return api.UploadView{}, false
		}
	}
	s.note(t.kind, "POST /uploads for "+t.id+" kept answering 5xx")
	return api.UploadView{}, false
}

// upload declares doc under id and PUTs put (the same bytes, or others of
// the same size) to the presigned URL.
func (s *soak) upload(ctx context.Context, h *api.Handler, t *task, id string, doc, put []byte) bool {
	v, ok := s.presign(ctx, h, t, id, doc)
	if !ok {
		return false
	}
	if err := PutDocument(ctx, v, put); err != nil {
		s.note(t.kind, err.Error())
		return false
	}
	return true
}

// submitDocument plays the callers of a document task. document: upload,
// submit naming it (202), the same submit again (200, the same task), then
// another version of the document under the same key (422
// idempotency-key-reused). document_altered: first bytes other than the
// declared ones (422 upload-mismatch, and the task must not exist), then
// the declared bytes under a new upload id (202).
func (s *soak) submitDocument(ctx context.Context, t *task, rec *record) {
	d := &docRecord{doc: documentBytes(t.i, 1)}
	s.mu.Lock()
	s.docs[t.id] = d
	s.mu.Unlock()
	if t.kind == DocumentAltered {
		other := documentBytes(t.i, 2) // the same size, other bytes
		// A deliberate bad-input probe: through the repeats' handler, so
		// its refusal's read (a 422 looks for an earlier task under the
		// key, for a replay after the upload expired) stays out of the
		// pipeline's per-task figures.
		if s.upload(ctx, s.docReplayer, t, uploadID(t, "altered"), d.doc, other) {
			c := s.submitWith(ctx, s.docReplayer, t, rec, "altered", t.input, DocumentSubmit(t.input, uploadID(t, "altered")))
			_, err := s.clean.Get(ctx, t.id)
			s.mu.Lock()
			d.altered = true
			d.absentAfter = errors.Is(err, ledger.ErrNotFound)
			s.mu.Unlock()
			if c.status == http.StatusUnprocessableEntity && c.problem == api.TypeUploadMismatch {
				s.inject(DocumentAltered)
			}
		}
	}
	if !s.upload(ctx, s.submit, t, uploadID(t, "a"), d.doc, d.doc) {
		return
	}
	body := DocumentSubmit(t.input, uploadID(t, "a"))
	if c := s.submitBody(ctx, t, rec, "a", t.input, body); c.status/100 != 2 || t.kind != Document {
		return
	}
	// The repeats through their own handler (wireDocuments).
	s.submitWith(ctx, s.docReplayer, t, rec, "dup", t.input, body)
	v2 := documentBytes(t.i, 2)
	if !s.upload(ctx, s.docReplayer, t, uploadID(t, "b"), v2, v2) {
		return
	}
	s.submitWith(ctx, s.docReplayer, t, rec, "b", t.input, DocumentSubmit(t.input, uploadID(t, "b")))
	s.inject(Document)
}
