package api_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestUploadIDsAreNotShared: POST /uploads accepts a caller-chosen id, and
// the upload intent is keyed by caller as well as id
// (upload-intents/<scope_hash>/<upload_id>, like the upload itself at
// uploads/<scope_hash>/<upload_id>), so ids are per caller: caller B
// declaring "contract-7", an id caller A already uses, gets its own 201
// exactly as for an unused id. In one namespace for every caller, B would
// get 409 upload-id-taken there and learn that A has an upload named
// "contract-7" (ids are caller-chosen and may be meaningful), and could
// squat ids A is about to use. DESIGN §11: knowing another client's
// identifiers never gives access — nor an existence oracle, nor a denial
// of service.
func TestUploadIDsAreNotShared(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		docA := []byte("%PDF-1.7 A's contract")
		docB := []byte("%PDF-1.7 B's unrelated file")

		uploadView(t, b.do(t, uploadReq(declare("contract-7", docA, "application/pdf"), asJWT("caller-a"))))
		// Control: an id nobody used is B's.
		uploadView(t, b.do(t, uploadReq(declare("contract-8", docB, "application/pdf"), asJWT("caller-b"))))
		// The same for an id A happens to use: B must not be able to tell.
		resp := b.do(t, uploadReq(declare("contract-7", docB, "application/pdf"), asJWT("caller-b")))
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("caller B declaring an id caller A uses = %d (%s), while an unused id is 201: "+
				"another caller's upload id is visible (and can be squatted)", resp.StatusCode, resp.Body)
		}
	})
}

// TestMissingUploadOnAWSIsNotA500: the contract promises 422
// unknown-upload for an upload id never declared, 409 upload-not-received
// for an upload not yet PUT, and a 200 replay of an accepted task after
// its upload expired. On AWS a role without s3:ListBucket gets 403, not
// 404, for a missing object, which would make each of these a 500 (and an
// ERROR log). The answer is the grant, not reading 403 as "missing" (a 403
// may as well be a broken policy or key, which must stay a loud 500):
// template.yaml gives the submit function s3:ListBucket on the payload
// bucket, proven by internal/templatetest (wantS3, listBucketNeeds). With
// the grant S3 answers 404 as the emulators do (kumo and moto ignore IAM),
// so the three cases run here on the emulators' 404s.
func TestMissingUploadOnAWSIsNotA500(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		doc := []byte("%PDF-1.7 not yet uploaded")

		uploadView(t, b.do(t, uploadReq(declare("declared-only", doc, "application/pdf"))))
		for _, c := range []struct {
			key, id, typ string
			status       int
		}{
			{"aws-403-1", "never-declared", api.TypeUnknownUpload, http.StatusUnprocessableEntity},
			{"aws-403-2", "declared-only", api.TypeUploadNotReceived, http.StatusConflict},
		} {
			resp := b.do(t, submitReq(c.key, docBody("read it", c.id)))
			if resp.StatusCode != c.status {
				t.Errorf("upload %s on AWS (with s3:ListBucket: 404): %d %s, want %d %s", c.id, resp.StatusCode, resp.Body, c.status, c.typ)
				continue
			}
			wantProblem(t, resp, c.status, c.typ)
		}

		// The replay after expiry (uploads/ and upload-intents/ live a
		// day): without the grant the expired intent would be a 403 too,
		// the replay path (priorDocuments) skipped for a 5xx, and a
		// retried submission of an accepted task a 500 forever.
		ctx := context.Background()
		u := uploadView(t, b.do(t, uploadReq(declare("expires", doc, "application/pdf"))))
		putUpload(t, u, doc)
		resp := b.do(t, submitReq("aws-403-3", docBody("read it", "expires")))
		wantStatus(t, resp, http.StatusAccepted)
		for _, k := range []string{payload.IntentKey(api.Anonymous, "expires"), payload.UploadKey(api.Anonymous, "expires")} {
			if _, err := e.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(e.Names.PayloadBucket), Key: aws.String(k)}); err != nil {
				t.Fatal(err)
			}
		}
		if again := b.do(t, submitReq("aws-403-3", docBody("read it", "expires"))); again.StatusCode != http.StatusOK {
			t.Errorf("replay of an accepted task after its upload expired, on AWS (with s3:ListBucket: 404): %d %s, want 200 and the task", again.StatusCode, again.Body)
		}
	})
}

// TestBudgetTooSmallForADocumentIsRefused: a spend budget is enforced by
// reserving contract.CallMaximum — "a token is at least one byte of text",
// so prompt bytes + 32 + max_tokens bound a call — before every call, and
// a submit whose budget cannot cover one call is refused 400. The provider reads a
// task's documents as input tokens, so the bound counts them too (at
// submit, in the worker's reservation and in admission): otherwise a 200 KB
// text document under a 2,000-token budget would be accepted and the
// worker would reserve ~150 tokens for a call that may use ~200,000 — the
// budget (and the requests/tokens-per-minute admission) would bound
// nothing once a document is attached.
func TestBudgetTooSmallForADocumentIsRefused(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		doc := bytes.Repeat([]byte("quarterly revenue rose in every region "), 5000) // 195 KB of text
		u := uploadView(t, b.do(t, uploadReq(declare("big-text", doc, "text/plain"))))
		putUpload(t, u, doc)

		body := `{"kind":"generate","input":{"prompt":"summarise","max_tokens":100},"budget":{"max_total_tokens":2000},"documents":[{"upload_id":"big-text"}]}`
		resp := b.do(t, submitReq("budget-doc-1", body))
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a 2,000-token budget with a %d-byte text document = %d %s; want 400 (the document alone may be ~%d input tokens, which no reservation counts)",
				len(doc), resp.StatusCode, resp.Body, len(doc))
		}
		if p := wantProblem(t, resp, http.StatusBadRequest, api.TypeInvalidBody); p.Field != "budget.max_total_tokens" {
			t.Errorf("field %q, want budget.max_total_tokens", p.Field)
		}
	})
}

// TestRegenerateChecksItsDocuments: a regenerate inherits the parent's
// document references, and a regenerate chain may outlive the lifecycle of
// inputs/ counted from the parent's submit (each link's item lives 7 days
// past its completion; see templatetest's
// TestPayloadsOutliveAnApprovalWait). So a regenerate checks each
// inherited document (re-adopting it renews its lifecycle clock) and is
// refused when one is gone, nothing written — rather than accepted (202)
// for a document the bucket no longer has, for the worker to fail
// document_unavailable. Here the lifecycle's deletion is done by hand.
func TestRegenerateChecksItsDocuments(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		ctx := context.Background()
		doc := []byte("the contract, page one")
		putUpload(t, uploadView(t, b.do(t, uploadReq(declare("regen-doc", doc, "text/plain")))), doc)
		resp := b.do(t, submitReq("regen-parent", docBody("summarise", "regen-doc")))
		wantStatus(t, resp, http.StatusAccepted)
		parent := view(t, resp)

		if _, err := e.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(e.Names.PayloadBucket), Key: aws.String(payload.InputKey(payload.Digest(doc)))}); err != nil {
			t.Fatal(err)
		}
		resp = b.do(t, regenReq(parent.TaskID, "regen-child", `{"input":{"prompt":"summarise again"}}`))
		if resp.StatusCode == http.StatusAccepted {
			t.Fatalf("a regenerate whose inherited document is gone from the bucket was accepted: %s", resp.Body)
		}
	})
}
