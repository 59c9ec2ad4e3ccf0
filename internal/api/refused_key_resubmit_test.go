package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRefusedKeyIsFreeAndALostWriteReplays: a refused key is free (a
// lower max_tokens under the same key is 202; the same over-limit body
// once the limit is raised is 202), and a submit whose PutItem reply was
// lost (503) replays 200 after the limit was lowered below it.
func TestRefusedKeyIsFreeAndALostWriteReplays(t *testing.T) {
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
		prof := simulatedProfile
		prof.TokensPerMinute = 1_000
		b.h.Provider = &prof

		wantProblem(t, b.do(t, submitReq("k1", withMaxTokens("hello", 2_000))), http.StatusUnprocessableEntity, api.TypeExceedsAdmissionLimit)
		wantStatus(t, b.do(t, submitReq("k1", withMaxTokens("hello", 100))), http.StatusAccepted)
		wantProblem(t, b.do(t, submitReq("k2", withMaxTokens("hello", 2_000))), http.StatusUnprocessableEntity, api.TypeExceedsAdmissionLimit)
		prof.TokensPerMinute = 10_000
		wantStatus(t, b.do(t, submitReq("k2", withMaxTokens("hello", 2_000))), http.StatusAccepted)

		d.lose.Store(true)
		wantStatus(t, b.do(t, submitReq("k3", withMaxTokens("hello", 5_000))), http.StatusServiceUnavailable)
		d.lose.Store(false)
		prof.TokensPerMinute = 1_000
		resp := b.do(t, submitReq("k3", withMaxTokens("hello", 5_000)))
		wantStatus(t, resp, http.StatusOK)
		if resp.Headers[api.HeaderIdempotentReplayed] != "true" {
			t.Fatalf("not a replay: %v", resp.Headers)
		}
		if n := len(scanTasks(t, e)); n != 3 {
			t.Fatalf("%d tasks, want 3", n)
		}
	})
}
