package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// claimAt claims id at the bundle's clock, failing the test on an error.
func claimAt(t *testing.T, l *ledger.Ledger, id string) *ledger.Task {
	t.Helper()
	c, err := l.Claim(context.Background(), id, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return c
}

// A task whose first attempt is retried and whose second completes shows
// both, with their claim, call start and end times and outcomes — written
// by the claims, the mark, the retry and the completion, no other write.
func TestRetriedThenCompletedTaskShowsBothAttempts(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "history-two")
		b.clock.Advance(time.Second)
		t1 := b.clock.Now().UnixMilli()
		c1 := claimAt(t, b.l, task.TaskID)
		if h := c1.History(); len(h) != 1 || h[0].Attempt != 1 || h[0].ClaimedMs != t1 || h[0].Outcome != ledger.OutcomeRunning {
			t.Fatalf("history while running = %+v; want attempt 1 running since %d", h, t1)
		}
		b.clock.Advance(200 * time.Millisecond)
		s1 := b.clock.Now().UnixMilli()
		m, err := b.l.MarkCallStarted(ctx, task.TaskID, c1.AssignmentVersion, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		c1.CallStartedMs = m.CallStartedMs // as the worker keeps it
		b.clock.Advance(3 * time.Second)
		e1 := b.clock.Now().UnixMilli()
		if _, err := b.l.ScheduleRetry(ctx, task.TaskID, c1.AssignmentVersion, b.clock.Now(), "provider_5xx", "busy", ledger.InAttempt(c1)); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(2 * time.Second)
		t2 := b.clock.Now().UnixMilli()
		c2 := claimAt(t, b.l, task.TaskID)
		b.clock.Advance(time.Second)
		done, err := b.l.Complete(ctx, task.TaskID, c2.AssignmentVersion, ledger.Completion{Result: `{"text":"ok"}`, Provider: "sim", ProviderRef: "ref-2"}, ledger.InAttempt(c2))
		if err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, b, task.TaskID)
		want := []ledger.AttemptRecord{
			{Attempt: 1, ClaimedMs: t1, CallStartedMs: s1, EndedMs: e1, Outcome: ledger.OutcomeRetry, ErrorClass: "provider_5xx"},
			{Attempt: 2, ClaimedMs: t2, EndedMs: done.CompletedMs, Outcome: ledger.OutcomeCompleted, ProviderRef: "ref-2"},
		}
		assertHistory(t, got.History(), want)
		if len(got.AttemptLog) != 1 {
			t.Errorf("attempt_log = %q; want the retried attempt's entry only (the latest is read from the item)", got.AttemptLog)
		}
	})
}

// A claim whose reply was lost, and which the ledger recognises as its own
// (write_nonce), is one attempt: the history holds it once.
func TestLostReplyClaimIsOneAttempt(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "history-lost-claim")
		l, inj := faulty(t, b, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.N == 1 {
				return faultinject.LostReply
			}
			return ""
		})
		c1 := claimAt(t, l, task.TaskID)
		if inj.Total(faultinject.LostReply) != 1 || c1.Attempts != 1 {
			t.Fatalf("setup: faults %+v, attempts %d", inj.Injected(), c1.Attempts)
		}
		b.clock.Advance(time.Second)
		if _, err := l.ScheduleRetry(ctx, task.TaskID, c1.AssignmentVersion, b.clock.Now(), "provider_5xx", "busy", ledger.InAttempt(c1)); err != nil {
			t.Fatal(err)
		}
		c2 := claimAt(t, b.l, task.TaskID)
		if _, err := b.l.Complete(ctx, task.TaskID, c2.AssignmentVersion, ledger.Completion{Result: `{"text":"ok"}`}); err != nil {
			t.Fatal(err)
		}
		h := mustGet(t, b, task.TaskID).History()
		if len(h) != 2 || h[0].Attempt != 1 || h[0].ClaimedMs != c1.ClaimedMs || h[0].Outcome != ledger.OutcomeRetry ||
			h[1].Attempt != 2 || h[1].Outcome != ledger.OutcomeCompleted {
			t.Fatalf("history = %+v; want attempt 1 retry, attempt 2 completed", h)
		}
	})
}

// The history holds at most max_attempts attempts, also after an
// operator's retry gives the task a fresh budget; an attempt given back
// (no provider call made) is no attempt and leaves nothing.
func TestHistoryNeverExceedsMaxAttempts(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		n := newTask("history-bound", "p")
		n.MaxAttempts = 2
		task, err := b.l.Create(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		retry := func() *ledger.Task {
			c := claimAt(t, b.l, task.TaskID)
			b.clock.Advance(time.Second)
			r, err := b.l.ScheduleRetry(ctx, task.TaskID, c.AssignmentVersion, b.clock.Now(), "provider_5xx", "busy", ledger.InAttempt(c))
			if err != nil {
				t.Fatal(err)
			}
			b.clock.Advance(time.Second)
			return r
		}
		// A claim given back records nothing.
		c := claimAt(t, b.l, task.TaskID)
		if _, err := b.l.Release(ctx, task.TaskID, c.AssignmentVersion, ledger.InAttempt(c)); err != nil {
			t.Fatal(err)
		}
		if h := mustGet(t, b, task.TaskID).History(); len(h) != 0 {
			t.Fatalf("history after a given-back claim = %+v; want none", h)
		}
		retry()
		last := retry()
		if h := last.History(); len(h) != 2 || h[0].Attempt != 1 || h[1].Attempt != 2 {
			t.Fatalf("history after two attempts = %+v", h)
		}
		if _, err := b.l.Park(ctx, last, ledger.ParkOptions{State: last.State, Version: last.AssignmentVersion},
			ledger.Review{Reason: ledger.ReviewBudgetExhausted, Summary: "out of attempts"}); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := b.l.Act(ctx, task.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "op"}); err != nil {
			t.Fatal(err)
		}
		final := retry()
		if len(final.AttemptLog) > 2 {
			t.Errorf("attempt_log holds %d entries; max_attempts is 2", len(final.AttemptLog))
		}
		h := final.History()
		if len(h) != 2 || h[1].Attempt != 1 || h[1].Outcome != ledger.OutcomeRetry || h[1].ClaimedMs == h[0].ClaimedMs {
			t.Fatalf("history after the operator's retry = %+v; want the last 2 attempts, the fresh budget's first last", h)
		}
	})
}

// An attempt that ended without a record — its worker died and the
// reconciler re-queued the task — still shows its number once the next
// attempt is claimed, as not recorded.
func TestLapsedAttemptShowsAsNotRecorded(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "history-lapsed")
		c1 := claimAt(t, b.l, task.TaskID)
		b.clock.Advance(2 * time.Minute)
		q, err := b.l.Requeue(ctx, task.TaskID, ledger.StateRunning, c1.AssignmentVersion)
		if err != nil {
			t.Fatal(err)
		}
		if h := q.History(); len(h) != 1 || h[0].Outcome != ledger.OutcomeLapsed || h[0].ClaimedMs != c1.ClaimedMs {
			t.Fatalf("history of the re-queued task = %+v; want attempt 1 lapsed", h)
		}
		c2 := claimAt(t, b.l, task.TaskID)
		h := c2.History()
		if len(h) != 2 || h[0].Attempt != 1 || h[0].Outcome != ledger.OutcomeNotRecorded || h[1].Attempt != 2 || h[1].Outcome != ledger.OutcomeRunning {
			t.Fatalf("history = %+v; want attempt 1 not recorded, attempt 2 running", h)
		}
	})
}

func assertHistory(t *testing.T, got, want []ledger.AttemptRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("history = %+v; want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Attempt != w.Attempt || g.ClaimedMs != w.ClaimedMs || g.CallStartedMs != w.CallStartedMs || g.EndedMs != w.EndedMs ||
			g.Outcome != w.Outcome || g.ErrorClass != w.ErrorClass || g.ProviderRef != w.ProviderRef {
			t.Errorf("attempt %d = %+v; want %+v", i+1, g, w)
		}
	}
}

// Two claims of one task in the same millisecond are still two attempts
// (a frozen clock, or a retry due at once on a fast engine).
func TestAttemptsClaimedInOneMillisecondStayApart(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "history-same-ms")
		c1 := claimAt(t, b.l, task.TaskID)
		if _, err := b.l.ScheduleRetry(ctx, task.TaskID, c1.AssignmentVersion, b.clock.Now(), "provider_5xx", "busy", ledger.InAttempt(c1)); err != nil {
			t.Fatal(err)
		}
		c2 := claimAt(t, b.l, task.TaskID)
		if _, err := b.l.Complete(ctx, task.TaskID, c2.AssignmentVersion, ledger.Completion{Result: `{"text":"ok"}`}); err != nil {
			t.Fatal(err)
		}
		h := mustGet(t, b, task.TaskID).History()
		if len(h) != 2 || h[0].Outcome != ledger.OutcomeRetry || h[1].Outcome != ledger.OutcomeCompleted || h[0].ClaimedMs != h[1].ClaimedMs {
			t.Fatalf("history = %+v; want attempt 1 retry and attempt 2 completed, claimed in the same millisecond", h)
		}
	})
}
