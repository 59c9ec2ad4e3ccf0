package opsapi_test

import (
	"encoding/base64"
	"testing"

	"github.com/taskledger/taskledger/internal/testenv"
)

// TestReviewListRefusesACursorItNeverGaveAsABadCursor: GET /reviews
// continues only from a next_cursor it gave. A cursor that decodes (base64
// JSON of flat strings and numbers) but is not a key of the open_reviews
// index — an empty key, null, or attributes the index does not have — is
// as much "not a cursor this list gave" as one that does not decode: a 400
// bad-cursor problem, not a 500 (DynamoDB refuses such an
// ExclusiveStartKey with a ValidationException, as moto does) nor the
// first page again (kumo ignores it).
func TestReviewListRefusesACursorItNeverGaveAsABadCursor(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		parked(t, b, "cursor-a")
		for _, js := range []string{`{}`, `null`, `{"x":"y"}`, `{"task_id":"t_x","review_status":"open","dead_lettered_at":5}`} {
			c, h, m := do(t, b, "GET", "/reviews?cursor="+base64.RawURLEncoding.EncodeToString([]byte(js)), "")
			if c != 400 || h.Get("Content-Type") != "application/problem+json" || m["type"] != "https://taskledger.dev/problems/bad-cursor" {
				t.Errorf("cursor %s: got %d %s %v, want a 400 bad-cursor problem", js, c, h.Get("Content-Type"), m["type"])
			}
		}
	})
}
