package api_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRefusalHoldsUnderAKeyWhoseTaskExpired: an item whose retention
// window ended (expires_at passed, the TTL sweeper not there yet) is no
// task any more — Create treats it as absent and records a FRESH task — so
// refuse() does not take it for a replay and skip the 422. Else a key last
// used more than 7 days ago would let a task the worker's provider could
// never run through the submit check, while the very same body under a
// never-used key is refused 422.
func TestRefusalHoldsUnderAKeyWhoseTaskExpired(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e)
		onClock(t, b, clock)
		prof := simulatedProfile
		prof.TokensPerMinute = 1_000
		b.h.Provider = &prof

		old := view(t, b.do(t, submitReq("reused-key", withMaxTokens("hello", 100))))
		wantStatus(t, b.do(t, cancelReq(old.TaskID)), http.StatusOK)
		clock.Advance(ledger.DefaultRetention + time.Hour) // the cancelled task's window is over

		// Control: a fresh key with the over-limit body is refused.
		wantProblem(t, b.do(t, submitReq("fresh-key", withMaxTokens("hello", 2_000))), http.StatusUnprocessableEntity, api.TypeExceedsAdmissionLimit)

		resp := b.do(t, submitReq("reused-key", withMaxTokens("hello", 2_000)))
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("over-limit submit under a key whose task expired: %d %s; want 422 %s (nothing recorded) — it was accepted as a new task the worker can never admit",
				resp.StatusCode, resp.Body, api.TypeExceedsAdmissionLimit)
		}
	})
}

// TestDocumentsRefusalHoldsUnderAKeyWhoseTaskExpired: the same with
// documents for a provider that takes none.
func TestDocumentsRefusalHoldsUnderAKeyWhoseTaskExpired(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e, withPayloads(e.Payloads(t, 0)))
		onClock(t, b, clock)
		oai := openaiProfile
		b.h.Provider = &oai

		old := view(t, b.do(t, submitReq("reused-doc-key", body("no documents"))))
		wantStatus(t, b.do(t, cancelReq(old.TaskID)), http.StatusOK)
		clock.Advance(ledger.DefaultRetention + time.Hour)

		doc := []byte("a short text the model should read")
		putUpload(t, uploadView(t, b.do(t, uploadReq(declare("notes", doc, "text/plain")))), doc)
		wantProblem(t, b.do(t, submitReq("fresh-doc-key", docBody("read it", "notes"))), http.StatusUnprocessableEntity, api.TypeDocumentsNotSupported)

		resp := b.do(t, submitReq("reused-doc-key", docBody("read it", "notes")))
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("documents submit to an openai deployment under a key whose task expired: %d %s; want 422 %s",
				resp.StatusCode, resp.Body, api.TypeDocumentsNotSupported)
		}
	})
}

// TestRegenerateReplayAfterParentExpiryAnswersTheTask: a regenerate is
// accepted a minute before its (cancelled) parent's retention ends; the
// client lost the 202 and retries with the same Idempotency-Key and body
// three minutes later. The child task exists and is live (queued), so the
// retry answers it (200, replayed) — the parent's expiry check must not
// answer 404 not-found first, telling the caller the request's target is
// gone while the task it created is running.
func TestRegenerateReplayAfterParentExpiryAnswersTheTask(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e)
		onClock(t, b, clock)
		root := view(t, b.do(t, submitReq("replay-root", body("p"))))
		wantStatus(t, b.do(t, cancelReq(root.TaskID)), http.StatusOK)
		clock.Advance(ledger.DefaultRetention - time.Minute)
		resp := b.do(t, regenReq(root.TaskID, "replay-regen", ""))
		wantStatus(t, resp, http.StatusAccepted)
		child := view(t, resp)
		clock.Advance(3 * time.Minute)
		if got, err := b.l.Get(t.Context(), child.TaskID); err != nil || got.State != ledger.StateQueued {
			t.Fatalf("setup: child %+v (%v), want queued", got, err)
		}
		resp = b.do(t, regenReq(root.TaskID, "replay-regen", ""))
		if resp.StatusCode != http.StatusOK || resp.Headers[api.HeaderIdempotentReplayed] != "true" {
			t.Fatalf("retry of an accepted regenerate (same key, same body), its task %s queued: %d %s; want 200 replayed", child.TaskID, resp.StatusCode, resp.Body)
		}
	})
}

// lostPutDDB performs PutItem, then (while lose is set) reports the
// deadline passed: the write is in, its reply lost.
type lostPutDDB struct {
	ledger.DynamoDB
	lose atomic.Bool
}

func (d *lostPutDDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := d.DynamoDB.PutItem(ctx, in, o...)
	if err == nil && d.lose.Load() {
		return nil, context.DeadlineExceeded
	}
	return out, err
}

// TestRegenerateRetryAfterALostReplyAndParentExpiryAnswersTheTask: the
// regenerate's own PutItem is applied but its reply lost; the API answers
// 503 "Retrying with the same Idempotency-Key is safe". The client retries
// after the parent's retention window ended (it was 2 minutes from its
// end), and the retry answers the regenerate's task (200), which exists,
// queued, and will run — a 404 would have the client believe nothing was
// created.
func TestRegenerateRetryAfterALostReplyAndParentExpiryAnswersTheTask(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e)
		d := &lostPutDDB{DynamoDB: e.DDB}
		l, err := ledger.New(d, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		b.l, b.h.Ledger, b.h.Now = l, l, clock.Now
		root := view(t, b.do(t, submitReq("lost-root", body("p"))))
		wantStatus(t, b.do(t, cancelReq(root.TaskID)), http.StatusOK)
		clock.Advance(ledger.DefaultRetention - 2*time.Minute)
		d.lose.Store(true)
		resp := b.do(t, regenReq(root.TaskID, "lost-regen", ""))
		d.lose.Store(false)
		wantStatus(t, resp, http.StatusServiceUnavailable)
		childID := l.TaskID("anonymous", "lost-regen")
		if got, err := l.Get(t.Context(), childID); err != nil || got.State != ledger.StateQueued {
			t.Fatalf("setup: the lost write's task %s: %+v (%v), want queued", childID, got, err)
		}
		clock.Advance(5 * time.Minute) // the client's retry, after backoff
		resp = b.do(t, regenReq(root.TaskID, "lost-regen", ""))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("retry with the same key after a 503 that said it is safe: %d %s; want 200 with task %s (it exists, queued)", resp.StatusCode, resp.Body, childID)
		}
	})
}
