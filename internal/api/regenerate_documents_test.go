package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRegenerateRenewsItsDocuments: a regenerate renews each inherited
// document (inputs/<sha256> copied onto itself, so its lifecycle counts
// from the child); one that is gone is 409 document-expired naming it,
// with nothing written; a replay of a regenerate recorded before the
// document went is still the recorded task.
func TestRegenerateRenewsItsDocuments(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		ctx := context.Background()
		doc := []byte("the contract, page two")
		key := payload.InputKey(payload.Digest(doc))
		putUpload(t, uploadView(t, b.do(t, uploadReq(declare("renew-doc", doc, "text/plain")))), doc)
		resp := b.do(t, submitReq("renew-parent", docBody("summarise", "renew-doc")))
		wantStatus(t, resp, http.StatusAccepted)
		parent := view(t, resp)
		modified := func() time.Time {
			t.Helper()
			h, err := e.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(e.Names.PayloadBucket), Key: aws.String(key)})
			if err != nil {
				t.Fatal(err)
			}
			return aws.ToTime(h.LastModified)
		}
		first := modified()
		// Await the emulator's clock passing the parent's write (LastModified
		// has one-second resolution) by writing probes, not by sleeping.
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := e.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.Names.PayloadBucket), Key: aws.String("probe/renew")}); err != nil {
				t.Fatal(err)
			}
			h, err := e.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(e.Names.PayloadBucket), Key: aws.String("probe/renew")})
			if err != nil {
				t.Fatal(err)
			}
			if aws.ToTime(h.LastModified).After(first) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the emulator's clock did not advance")
			}
		}
		resp = b.do(t, regenReq(parent.TaskID, "renew-child", `{"input":{"prompt":"again"}}`))
		wantStatus(t, resp, http.StatusAccepted)
		child := view(t, resp)
		if again := modified(); !again.After(first) {
			t.Errorf("the regenerate left %s last modified at %v (the parent's write): not renewed", key, again)
		}

		if _, err := e.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(e.Names.PayloadBucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
		p := wantProblem(t, b.do(t, regenReq(parent.TaskID, "renew-late", `{"input":{"prompt":"again"}}`)), http.StatusConflict, api.TypeDocumentExpired)
		if p.Field != "documents[0]" {
			t.Errorf("field %q, want documents[0]", p.Field)
		}
		if _, err := b.l.Get(ctx, b.l.TaskID(api.Anonymous, "renew-late")); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("a refused regenerate wrote a task: %v", err)
		}
		resp = b.do(t, regenReq(parent.TaskID, "renew-child", `{"input":{"prompt":"again"}}`))
		wantStatus(t, resp, http.StatusOK)
		if got := view(t, resp); got.TaskID != child.TaskID {
			t.Errorf("replay after the document expired = %s, want the recorded %s", got.TaskID, child.TaskID)
		}
	})
}
