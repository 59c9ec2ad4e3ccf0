package api_test

// Refusing at submit what the worker's provider could never run
// (providercheck.go): documents for a provider that takes none, and a call
// bound above the model's tokens_per_minute — 422, nothing recorded (no
// task item, no document copied or renewed), on kumo and moto. A replay of
// a task accepted before the configuration changed still answers that task.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

var (
	openaiProfile    = api.ProviderProfile{Name: "openai", Model: "gpt-x", AcceptsDocuments: false}
	simulatedProfile = api.ProviderProfile{Name: "simulated", Model: "simulated-1", AcceptsDocuments: true}
)

// bucketObjects lists every key in the payload bucket with its ETag, so a
// test can assert a refused request wrote no object.
func bucketObjects(t *testing.T, e *testenv.Env) []string {
	t.Helper()
	var out []string
	p := s3.NewListObjectsV2Paginator(e.S3, &s3.ListObjectsV2Input{Bucket: aws.String(e.Names.PayloadBucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list the payload bucket: %v", err)
		}
		for _, o := range page.Contents {
			out = append(out, aws.ToString(o.Key)+" "+aws.ToString(o.ETag))
		}
	}
	slices.Sort(out)
	return out
}

// unchanged asserts that the tasks table holds exactly tasks items and the
// bucket exactly objects.
func unchanged(t *testing.T, e *testenv.Env, what string, tasks int, objects []string) {
	t.Helper()
	if n := len(scanTasks(t, e)); n != tasks {
		t.Fatalf("%s: %d task items, want %d: a refusal recorded a task", what, n, tasks)
	}
	if got := bucketObjects(t, e); !slices.Equal(got, objects) {
		t.Fatalf("%s: the payload bucket changed:\n got %v\nwant %v", what, got, objects)
	}
}

// withMaxTokens is a generate submit of prompt with input.max_tokens (0:
// unset) naming upload ids.
func withMaxTokens(prompt string, maxTokens int, ids ...string) string {
	in := map[string]any{"prompt": prompt}
	if maxTokens > 0 {
		in["max_tokens"] = maxTokens
	}
	m := map[string]any{"kind": "generate", "input": in}
	if len(ids) > 0 {
		docs := make([]map[string]string, len(ids))
		for i, id := range ids {
			docs[i] = map[string]string{"upload_id": id}
		}
		m["documents"] = docs
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestDocumentsNotSupported: with a provider that takes no documents
// (openai) a submit naming one is 422 documents-not-supported naming the
// provider, before the upload is resolved or copied; without documents it
// is 202. A regenerate inheriting documents is refused the same way,
// before they are renewed. A replay of a task accepted with documents
// before the provider changed still answers that task.
func TestDocumentsNotSupported(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e.Payloads(t, 0)))
		sim, oai := simulatedProfile, openaiProfile
		doc := []byte("a short text the model should read")
		putUpload(t, uploadView(t, b.do(t, uploadReq(declare("notes", doc, "text/plain")))), doc)

		// Accepted while the provider took documents.
		b.h.Provider = &sim
		resp := b.do(t, submitReq("before", docBody("read it", "notes")))
		wantStatus(t, resp, http.StatusAccepted)
		parent := view(t, resp)
		objects := bucketObjects(t, e)
		if !slices.ContainsFunc(objects, func(o string) bool { return strings.HasPrefix(o, payload.InputKey(payload.Digest(doc))+" ") }) {
			t.Fatalf("setup: the accepted document was not copied to inputs/: %v", objects)
		}

		b.h.Provider = &oai
		p := wantProblem(t, b.do(t, submitReq("after", docBody("read it", "notes"))), http.StatusUnprocessableEntity, api.TypeDocumentsNotSupported)
		if p.Field != "documents" || !strings.Contains(p.Detail, "openai") || !strings.Contains(p.Detail, "gpt-x") || !strings.Contains(p.Detail, "nothing was recorded") {
			t.Errorf("problem %+v: want field documents and a detail naming the provider and model", p)
		}
		unchanged(t, e, "refused submit", 1, objects)
		// Refused before Resolve: an upload id nobody declared gets the same
		// answer, not unknown-upload.
		wantProblem(t, b.do(t, submitReq("after-2", docBody("read it", "never-declared"))), http.StatusUnprocessableEntity, api.TypeDocumentsNotSupported)

		p = wantProblem(t, b.do(t, regenReq(parent.TaskID, "regen-after", "")), http.StatusUnprocessableEntity, api.TypeDocumentsNotSupported)
		if !strings.Contains(p.Detail, "names 1") {
			t.Errorf("regenerate problem %q does not count the inherited document", p.Detail)
		}
		unchanged(t, e, "refused regenerate", 1, objects)

		// The task accepted before the change replays; the same key with
		// another payload is still 422 idempotency-key-reused.
		resp = b.do(t, submitReq("before", docBody("read it", "notes")))
		wantStatus(t, resp, http.StatusOK)
		if view(t, resp).TaskID != parent.TaskID || resp.Headers[api.HeaderIdempotentReplayed] != "true" {
			t.Fatalf("replay after the provider changed: %s", resp.Body)
		}
		wantProblem(t, b.do(t, submitReq("before", docBody("read it again", "notes"))), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
		unchanged(t, e, "replays", 1, objects)

		// Without documents the provider is fine.
		wantStatus(t, b.do(t, submitReq("plain", body("no documents here"))), http.StatusAccepted)
		if n := len(scanTasks(t, e)); n != 2 {
			t.Fatalf("%d tasks, want 2", n)
		}
	})
}

// TestExceedsAdmissionLimit: a pdf's bound is 200,000 tokens, so with the
// example's 200,000 tokens_per_minute a task naming one could never be
// admitted: 422 exceeds-admission-limit giving the bound and the limit,
// checked after the upload is verified and before it is copied; a
// prompt-only task under the limit is 202, one whose max_tokens pushes it
// over (or whose unset max_tokens does, on a small limit) is 422 on
// "input". A regenerate is checked the same way; replays of tasks accepted
// before the limit was lowered still answer them.
func TestExceedsAdmissionLimit(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e.Payloads(t, 0)))
		prof := simulatedProfile
		prof.TokensPerMinute = 200_000
		b.h.Provider = &prof
		pdf := []byte("%PDF-1.7 a contract of unknown length")
		putUpload(t, uploadView(t, b.do(t, uploadReq(declare("contract", pdf, "application/pdf")))), pdf)

		const prompt = "summarise the contract"
		bound := len(prompt) + contract.InputOverheadTokens + contract.OpaqueDocumentTokens + contract.DocumentOverheadTokens + 100
		objects := bucketObjects(t, e)
		p := wantProblem(t, b.do(t, submitReq("pdf", withMaxTokens(prompt, 100, "contract"))), http.StatusUnprocessableEntity, api.TypeExceedsAdmissionLimit)
		for _, want := range []string{fmt.Sprintf("reserves up to %d tokens", bound), "200000 tokens_per_minute", "model simulated-1", "upload contract, pdf", "nothing was recorded"} {
			if !strings.Contains(p.Detail, want) {
				t.Errorf("the 422 lacks %q: %s", want, p.Detail)
			}
		}
		if p.Field != "documents" {
			t.Errorf("field %q, want documents", p.Field)
		}
		unchanged(t, e, "refused pdf submit", 0, objects)

		// Under the limit: 202.
		resp := b.do(t, submitReq("small", withMaxTokens(prompt, 100)))
		wantStatus(t, resp, http.StatusAccepted)
		small := view(t, resp)

		// On a 5,000-token limit: exactly at it is admissible, one token
		// over is not, and so is an unset max_tokens (bounded by 8,192).
		prof.TokensPerMinute = 5_000
		at := 5_000 - len(prompt) - contract.InputOverheadTokens
		resp = b.do(t, submitReq("at-limit", withMaxTokens(prompt, at)))
		wantStatus(t, resp, http.StatusAccepted)
		atLimit := view(t, resp)
		objects = bucketObjects(t, e)
		p = wantProblem(t, b.do(t, submitReq("over-limit", withMaxTokens(prompt, at+1))), http.StatusUnprocessableEntity, api.TypeExceedsAdmissionLimit)
		if p.Field != "input" || !strings.Contains(p.Detail, "reserves up to 5001 tokens") || !strings.Contains(p.Detail, "5000 tokens_per_minute") {
			t.Errorf("over by one: field %q detail %s", p.Field, p.Detail)
		}
		p = wantProblem(t, b.do(t, submitReq("default-max", withMaxTokens(prompt, 0))), http.StatusUnprocessableEntity, api.TypeExceedsAdmissionLimit)
		if !strings.Contains(p.Detail, fmt.Sprintf("%d for the output", contract.MaxTokensLimit)) {
			t.Errorf("unset max_tokens: %s", p.Detail)
		}
		unchanged(t, e, "refused over-limit submits", 2, objects)

		// The limit lowered below what an accepted task needs: a
		// regenerate inheriting its input is refused, the task itself
		// replays, and a regenerate that fits is accepted.
		prof.TokensPerMinute = 1_000
		wantProblem(t, b.do(t, regenReq(atLimit.TaskID, "regen-at", "")), http.StatusUnprocessableEntity, api.TypeExceedsAdmissionLimit)
		unchanged(t, e, "refused regenerate", 2, objects)
		resp = b.do(t, submitReq("at-limit", withMaxTokens(prompt, at)))
		wantStatus(t, resp, http.StatusOK)
		if view(t, resp).TaskID != atLimit.TaskID || resp.Headers[api.HeaderIdempotentReplayed] != "true" {
			t.Fatalf("replay of a task accepted under the old limit: %s", resp.Body)
		}
		wantStatus(t, b.do(t, regenReq(small.TaskID, "regen-small", "")), http.StatusAccepted)
		if n := len(scanTasks(t, e)); n != 3 {
			t.Fatalf("%d tasks, want 3", n)
		}

		// Without admission there is no bound to check: the pdf is accepted.
		prof.TokensPerMinute = 0
		wantStatus(t, b.do(t, submitReq("pdf", withMaxTokens(prompt, 100, "contract"))), http.StatusAccepted)
	})
}

// TestRegenerateOverAdmissionWithDocuments: a regenerate inheriting a pdf
// is refused once the limit no longer admits it, before the document is
// renewed, and a regenerate recorded before the change replays.
func TestRegenerateOverAdmissionWithDocuments(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e.Payloads(t, 0)))
		prof := simulatedProfile
		prof.TokensPerMinute = 300_000
		b.h.Provider = &prof
		pdf := []byte("%PDF-1.7 terms and conditions")
		putUpload(t, uploadView(t, b.do(t, uploadReq(declare("terms", pdf, "application/pdf")))), pdf)
		resp := b.do(t, submitReq("terms", withMaxTokens("summarise", 100, "terms")))
		wantStatus(t, resp, http.StatusAccepted)
		parent := view(t, resp)
		wantStatus(t, b.do(t, regenReq(parent.TaskID, "regen-1", "")), http.StatusAccepted)
		objects := bucketObjects(t, e)

		prof.TokensPerMinute = 200_000
		p := wantProblem(t, b.do(t, regenReq(parent.TaskID, "regen-2", "")), http.StatusUnprocessableEntity, api.TypeExceedsAdmissionLimit)
		if p.Field != "documents" || !strings.Contains(p.Detail, "upload terms, pdf") {
			t.Errorf("regenerate problem field %q detail %s", p.Field, p.Detail)
		}
		unchanged(t, e, "refused regenerate", 2, objects)
		resp = b.do(t, regenReq(parent.TaskID, "regen-1", ""))
		wantStatus(t, resp, http.StatusOK)
		if resp.Headers[api.HeaderIdempotentReplayed] != "true" {
			t.Fatalf("replay of the regenerate accepted before: %s", resp.Body)
		}
	})
}

// TestProviderRefusalWhenTheReplayReadFails: a refusal first reads whether
// the key is a replay; when that read is throttled the answer is 503
// (retry-safe), never a 422 a replay should not get, and nothing is
// written.
func TestProviderRefusalWhenTheReplayReadFails(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		var td *throttlingDDB
		b := setup(t, e, withDynamoDB(func(d ledger.DynamoDB) ledger.DynamoDB { td = &throttlingDDB{DynamoDB: d}; return td }))
		prof := simulatedProfile
		prof.TokensPerMinute = 1_000
		b.h.Provider = &prof
		td.get.Store(true)
		resp := b.do(t, submitReq("busy-over", withMaxTokens("hello", 2_000)))
		wantProblem(t, resp, http.StatusServiceUnavailable, api.TypeThrottled)
		if resp.Headers["Retry-After"] == "" {
			t.Fatal("no Retry-After")
		}
		if n := len(scanTasks(t, e)); n != 0 {
			t.Fatalf("%d items written", n)
		}
		td.get.Store(false)
		wantProblem(t, b.do(t, submitReq("busy-over", withMaxTokens("hello", 2_000))), http.StatusUnprocessableEntity, api.TypeExceedsAdmissionLimit)
		// A task under the limit needs no read to be accepted.
		td.get.Store(true)
		wantStatus(t, b.do(t, submitReq("under", withMaxTokens("hello", 100))), http.StatusAccepted)
	})
}
