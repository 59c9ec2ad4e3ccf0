package api_test

// Documents in the token budget check (issues 13 × 14): a budget must
// cover one call with its documents' bounds (contract.CallMaximumWith), at
// submit and at a regenerate inheriting them, on kumo and moto.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/testenv"
)

// docBudgetBody is a generate submit with a token budget naming uploads.
func docBudgetBody(prompt string, maxTokens, budget int, ids ...string) string {
	docs := make([]map[string]string, len(ids))
	for i, id := range ids {
		docs[i] = map[string]string{"upload_id": id}
	}
	b, _ := json.Marshal(map[string]any{"kind": "generate", "documents": docs,
		"input":  map[string]any{"prompt": prompt, "max_tokens": maxTokens},
		"budget": map[string]any{"max_total_tokens": budget}})
	return string(b)
}

// TestBudgetCountsDocuments: a 100,000-byte text document is bounded by
// its bytes, so a 50,000-token budget that covers the prompt alone is a
// 400 naming the document — nothing recorded, the upload not even copied
// to inputs/ — and one that covers prompt + document + output is
// accepted; a regenerate inheriting the document whose new prompt no
// longer fits the inherited budget with it is a 400 too.
func TestBudgetCountsDocuments(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		ctx := context.Background()
		doc := bytes.Repeat([]byte("0123456789"), 10_000) // 100,000 bytes of text
		u := uploadView(t, b.do(t, uploadReq(declare("big-txt", doc, "text/plain"))))
		putUpload(t, u, doc)

		const prompt = "summarise it"
		// prompt 12 + 32, document 100,000 + 64, output 100.
		need := len(prompt) + contract.InputOverheadTokens + len(doc) + contract.DocumentOverheadTokens + 100

		p := wantProblem(t, b.do(t, submitReq("small-budget", docBudgetBody(prompt, 100, 50_000, "big-txt"))), http.StatusBadRequest, api.TypeInvalidBody)
		for _, want := range []string{"upload big-txt", "txt, 100000 bytes", fmt.Sprintf("reserves up to %d tokens", need), "Nothing was recorded"} {
			if !strings.Contains(p.Detail, want) {
				t.Errorf("the 400 lacks %q: %s", want, p.Detail)
			}
		}
		if p.Field != "budget.max_total_tokens" {
			t.Errorf("field %q, want budget.max_total_tokens", p.Field)
		}
		if n := len(scanTasks(t, e)); n != 0 {
			t.Fatalf("a refused submit recorded %d tasks", n)
		}
		if _, err := e.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(e.Names.PayloadBucket), Key: aws.String(payload.InputKey(payload.Digest(doc)))}); err == nil {
			t.Fatal("a refused submit copied its document to inputs/")
		}
		// The prompt alone fits the same budget: it is the document that does not.
		wantStatus(t, b.do(t, submitReq("no-doc", budgetBody(prompt, `{"max_total_tokens":50000}`))), http.StatusAccepted)

		// One token short, then exactly enough.
		wantProblem(t, b.do(t, submitReq("short-by-one", docBudgetBody(prompt, 100, need-1, "big-txt"))), http.StatusBadRequest, api.TypeInvalidBody)
		resp := b.do(t, submitReq("fits", docBudgetBody(prompt, 100, need, "big-txt")))
		wantStatus(t, resp, http.StatusAccepted)
		parent := view(t, resp)

		// A regenerate inherits the document and the budget: a prompt one
		// byte longer no longer fits with the document (it would alone).
		longer, _ := json.Marshal(map[string]any{"input": map[string]any{"prompt": prompt + "!", "max_tokens": 100}})
		p = wantProblem(t, b.do(t, regenReq(parent.TaskID, "regen-long", string(longer))), http.StatusBadRequest, api.TypeInvalidBody)
		if !strings.Contains(p.Detail, "upload big-txt") || !strings.Contains(p.Detail, fmt.Sprintf("reserves up to %d tokens", need+1)) {
			t.Errorf("the regenerate's 400 does not name the inherited document's bound: %s", p.Detail)
		}
		if n := len(scanTasks(t, e)); n != 2 {
			t.Fatalf("%d tasks after the refused regenerate, want the 2 accepted", n)
		}
		// The same input as the parent fits.
		resp = b.do(t, regenReq(parent.TaskID, "regen-same", ""))
		wantStatus(t, resp, http.StatusAccepted)
		if cv := view(t, resp); len(cv.Documents) != 1 || cv.Budget == nil || cv.Budget.MaxTotalTokens != int64(need) {
			t.Fatalf("regenerate view: documents %+v budget %+v", cv.Documents, cv.Budget)
		}
	})
}
