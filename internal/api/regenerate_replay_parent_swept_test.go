package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRegenerateReplayAfterParentSweptAnswersTheTask: a retry of an
// accepted regenerate is answered from the task recorded under its key
// when the parent is past its retention but still in the table
// (TestRegenerateReplayAfterParentExpiryAnswersTheTask). DynamoDB's TTL
// sweeper deletes an expired item at a time of its own choosing (typically
// within days, often within minutes); once it has, the same retry — same
// caller, same key, same body, its task queued and about to run — is
// still answered 200 replayed, not 404 not-found: the replay lookup does
// not depend on the parent being visible.
func TestRegenerateReplayAfterParentSweptAnswersTheTask(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e)
		onClock(t, b, clock)
		root := view(t, b.do(t, submitReq("swept-root", body("p"))))
		wantStatus(t, b.do(t, cancelReq(root.TaskID)), http.StatusOK)
		clock.Advance(ledger.DefaultRetention - time.Minute)
		resp := b.do(t, regenReq(root.TaskID, "swept-regen", ""))
		wantStatus(t, resp, http.StatusAccepted)
		child := view(t, resp)
		clock.Advance(3 * time.Minute) // the client lost the 202 and retries

		// Control: past retention, not yet swept — answered 200.
		resp = b.do(t, regenReq(root.TaskID, "swept-regen", ""))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("setup: retry before the sweep: %d %s; want 200", resp.StatusCode, resp.Body)
		}

		// The TTL sweeper deletes the expired parent (expires_at passed).
		if _, err := e.DDB.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{
			TableName: &e.Names.TasksTable,
			Key:       map[string]ddbtypes.AttributeValue{"task_id": &ddbtypes.AttributeValueMemberS{Value: root.TaskID}},
		}); err != nil {
			t.Fatal(err)
		}
		if got, err := b.l.Get(t.Context(), child.TaskID); err != nil || got.State != ledger.StateQueued {
			t.Fatalf("setup: child %+v (%v), want queued", got, err)
		}
		resp = b.do(t, regenReq(root.TaskID, "swept-regen", ""))
		if resp.StatusCode != http.StatusOK || resp.Headers[api.HeaderIdempotentReplayed] != "true" {
			t.Fatalf("retry of an accepted regenerate after its parent was swept (same key, same body), its task %s queued: %d %s; want 200 replayed, as before the sweep", child.TaskID, resp.StatusCode, resp.Body)
		}
	})
}

// TestRegenerateRetryAfterParentSweptComparesTheRequest: with the parent
// deleted, a retry under the key of a recorded regenerate is compared with
// what that task recorded of its request — no input and the task took its
// parent's, or the same input (inline, or offloaded to S3 by its SHA-256):
// 200 replay; an input dropped, added or changed, or a key that names a
// regenerate of another parent: 422, nothing written; another caller's key,
// or none recorded: 404.
func TestRegenerateRetryAfterParentSweptComparesTheRequest(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e, withPayloads(e.Payloads(t, 64)))
		onClock(t, b, clock)
		root := view(t, b.do(t, submitReq("cmp-root", body("p"))))
		other := view(t, b.do(t, submitReq("cmp-other", body("q"))))
		wantStatus(t, b.do(t, cancelReq(root.TaskID)), http.StatusOK)
		small := `{"input":{"prompt":"short one"}}`
		large := `{"input":{"prompt":"` + strings.Repeat("long ", 40) + `"}}` // over the 64 B inline limit
		for key, body := range map[string]string{"cmp-inherit": "", "cmp-small": small, "cmp-large": large} {
			wantStatus(t, b.do(t, regenReq(root.TaskID, key, body)), http.StatusAccepted)
		}
		wantStatus(t, b.do(t, regenReq(other.TaskID, "cmp-of-other", "")), http.StatusAccepted)
		clock.Advance(ledger.DefaultRetention + time.Hour)
		if _, err := e.DDB.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{
			TableName: &e.Names.TasksTable,
			Key:       map[string]ddbtypes.AttributeValue{"task_id": &ddbtypes.AttributeValueMemberS{Value: root.TaskID}},
		}); err != nil {
			t.Fatal(err)
		}
		before := len(scanTasks(t, e))
		for _, c := range []struct {
			key, body string
			opts      []reqOpt
			status    int
		}{
			{"cmp-inherit", "", nil, http.StatusOK},
			{"cmp-inherit", small, nil, http.StatusUnprocessableEntity},
			{"cmp-small", small, nil, http.StatusOK},
			{"cmp-small", "", nil, http.StatusUnprocessableEntity},
			{"cmp-small", `{"input":{"prompt":"another"}}`, nil, http.StatusUnprocessableEntity},
			{"cmp-large", large, nil, http.StatusOK},
			{"cmp-large", small, nil, http.StatusUnprocessableEntity},
			{"cmp-of-other", "", nil, http.StatusUnprocessableEntity},
			{"cmp-never", "", nil, http.StatusNotFound},
			{"cmp-inherit", "", []reqOpt{asJWT("mallory")}, http.StatusNotFound},
		} {
			resp := b.do(t, regenReq(root.TaskID, c.key, c.body, c.opts...))
			if resp.StatusCode != c.status {
				t.Errorf("retry %s with %q after the parent was deleted: %d %s; want %d", c.key, c.body, resp.StatusCode, resp.Body, c.status)
			}
			if c.status == http.StatusOK && resp.Headers[api.HeaderIdempotentReplayed] != "true" {
				t.Errorf("retry %s: no Idempotent-Replayed header", c.key)
			}
		}
		if n := len(scanTasks(t, e)); n != before {
			t.Fatalf("%d items after the retries, %d before: a retry wrote", n, before)
		}
	})
}
