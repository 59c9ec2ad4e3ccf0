package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestTaskViewSaysWhatIsHappening(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		now := time.Now().UTC().Truncate(time.Millisecond)
		clock := func() time.Time { return now }
		l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		b := setup(t, e, withHandler(func(h *api.Handler) { h.Ledger, h.Now = l, clock }))
		ctx := context.Background()
		progress := func(id string) *api.ProgressView {
			t.Helper()
			resp := b.do(t, getReq(id))
			wantStatus(t, resp, http.StatusOK)
			v := view(t, resp)
			if v.Progress == nil {
				t.Fatalf("view of %s has no progress: %s", id, resp.Body)
			}
			return v.Progress
		}

		id := view(t, b.do(t, submitReq("p-1", body("hello")))).TaskID
		if p := progress(id); p.NextAttempt != 1 || p.MaxAttempts != 5 || p.Summary != "queued for attempt 1 of 5" {
			t.Fatalf("queued progress %+v", p)
		}

		claimed, err := l.Claim(ctx, id, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(4 * time.Second)
		p := progress(id)
		if p.Attempt != 1 || p.HeartbeatAt != claimed.UpdatedAt || p.LeaseUntil != time.UnixMilli(claimed.LeaseUntil).UTC().Format(time.RFC3339Nano) ||
			p.Summary != "attempt 1 of 5 running for 4s; lease renewed 4s ago" || p.ClaimedAt != claimed.UpdatedAt {
			t.Fatalf("running progress %+v (claimed at %s)", p, claimed.UpdatedAt)
		}

		next := now.Add(12 * time.Second)
		if _, err := l.ScheduleRetry(ctx, id, claimed.AssignmentVersion, next, "transient", "throttled"); err != nil {
			t.Fatal(err)
		}
		p = progress(id)
		if p.NextAttempt != 2 || p.NextAttemptAt != next.Format(time.RFC3339Nano) || p.NextAttemptInMs == nil || *p.NextAttemptInMs != 12000 ||
			!strings.HasSuffix(p.Summary, "attempt 2 in 12s") {
			t.Fatalf("retry_wait progress %+v, want attempt 2 at %s", p, next.Format(time.RFC3339Nano))
		}

		now = next.Add(time.Second)
		again, err := l.Claim(ctx, id, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		result := `{"text":"hi","model":"m","usage":{"input_tokens":7,"output_tokens":9}}`
		if _, err := l.Complete(ctx, id, again.AssignmentVersion, ledger.Completion{Result: result, Provider: "simulated"}); err != nil {
			t.Fatal(err)
		}
		p = progress(id)
		if p.Attempt != 2 || p.Tokens == nil || *p.Tokens != (api.TokensView{Input: 7, Output: 9}) || p.Summary != "completed after attempt 2 of 5" {
			t.Fatalf("completed progress %+v", p)
		}
	})
}

// The task view shows each attempt: the retried first with its claim and
// end, the completed second with its provider reference and tokens.
func TestTaskViewShowsAttemptsHistory(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		now := time.Now().UTC().Truncate(time.Millisecond)
		clock := func() time.Time { return now }
		l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		b := setup(t, e, withHandler(func(h *api.Handler) { h.Ledger, h.Now = l, clock }))
		ctx := context.Background()
		stamp := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
		id := view(t, b.do(t, submitReq("h-1", body("hello")))).TaskID
		if v := view(t, b.do(t, getReq(id))); v.AttemptsHistory == nil || len(v.AttemptsHistory) != 0 {
			t.Fatalf("queued task's attempts_history = %#v; want []", v.AttemptsHistory)
		}

		claim1 := now
		c1, err := l.Claim(ctx, id, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(3 * time.Second)
		end1 := now
		if _, err := l.ScheduleRetry(ctx, id, c1.AssignmentVersion, now, "transient", "throttled", ledger.InAttempt(c1)); err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Second)
		claim2 := now
		c2, err := l.Claim(ctx, id, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(5 * time.Second)
		v := view(t, b.do(t, getReq(id)))
		if v.Progress == nil || v.Progress.Summary != "attempt 2 of 5 running for 5s; lease renewed 5s ago" {
			t.Fatalf("running progress %+v", v.Progress)
		}
		if h := v.AttemptsHistory; len(h) != 2 || h[1] != (api.AttemptView{Attempt: 2, ClaimedAt: stamp(claim2), Outcome: "running"}) {
			t.Fatalf("attempts_history while running = %+v", h)
		}

		result := `{"text":"hi","model":"m","usage":{"input_tokens":7,"output_tokens":9}}`
		if _, err := l.Complete(ctx, id, c2.AssignmentVersion, ledger.Completion{Result: result, Provider: "simulated", ProviderRef: "sim-42"}); err != nil {
			t.Fatal(err)
		}
		h := view(t, b.do(t, getReq(id))).AttemptsHistory
		want := []api.AttemptView{
			{Attempt: 1, ClaimedAt: stamp(claim1), EndedAt: stamp(end1), Outcome: "retry", ErrorClass: "transient"},
			{Attempt: 2, ClaimedAt: stamp(claim2), EndedAt: stamp(now), Outcome: "completed", ProviderRef: "sim-42", Tokens: &api.TokensView{Input: 7, Output: 9}},
		}
		if len(h) != len(want) {
			t.Fatalf("attempts_history = %+v; want %+v", h, want)
		}
		for i := range want {
			g, w := h[i], want[i]
			if (g.Tokens == nil) != (w.Tokens == nil) || (g.Tokens != nil && *g.Tokens != *w.Tokens) {
				t.Errorf("attempt %d tokens = %+v; want %+v", i+1, g.Tokens, w.Tokens)
			}
			g.Tokens, w.Tokens = nil, nil
			if g != w {
				t.Errorf("attempt %d = %+v; want %+v", i+1, g, w)
			}
		}
	})
}
