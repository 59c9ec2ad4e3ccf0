package reconciler_test

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRelayBacksOffUnderBacklog: a task whose message sits unconsumed in a
// backlog is re-sent after DispatchTimeout, then after 2×, 4× … (capped),
// not every DispatchTimeout; two reconcilers racing at each step still send
// once.
func TestRelayBacksOffUnderBacklog(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		dt := ledger.DefaultDispatchTimeout
		task := create(t, b, "backlog")
		// Re-sends are due at dt, then 2dt, 4dt, 8dt later (the default cap is 8dt).
		gaps := []time.Duration{dt, 2 * dt, 4 * dt, 8 * dt, 8 * dt}
		sends := 0
		for i, gap := range gaps {
			b.clock.Advance(gap - time.Second)
			s := runTwice(t, b, nil)
			if got := s[0].Resent + s[1].Resent; got != 0 {
				t.Fatalf("step %d: re-sent %v before its backoff elapsed (%+v)", i, gap, s)
			}
			b.clock.Advance(2 * time.Second)
			s = runTwice(t, b, nil)
			if got := s[0].Resent + s[1].Resent; got != 1 {
				t.Fatalf("step %d: re-sent %d times after %v, want exactly 1 (%+v)", i, got, gap, s)
			}
			sends++
			got := get(t, b, task.TaskID)
			if got.Dispatches != sends || got.State != ledger.StateQueued {
				t.Fatalf("step %d: dispatches %d state %s", i, got.Dispatches, got.State)
			}
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != sends {
			t.Fatalf("queue holds %d messages, want %d re-sends", len(ids), sends)
		}
	})
}

// TestRelayClaimsFromTheIndexWithoutARead: a due queued task within its
// budgets is re-sent from its index entry alone — no GetItem — and the
// second re-send still sees the dispatch count and the age deadline, which
// proves the by_state projection carries them (moto enforces INCLUDE
// projections; kumo returns every attribute).
func TestRelayClaimsFromTheIndexWithoutARead(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		dt := ledger.DefaultDispatchTimeout
		task := create(t, b, "index-only")
		for i, gap := range []time.Duration{dt, 2 * dt} {
			b.clock.Advance(gap + time.Second)
			e.Counter.Reset()
			s := handle(t, b.handler())
			if s.Resent != 1 || s.Examined != 1 {
				t.Fatalf("re-send %d: summary %+v, want one examined and re-sent", i+1, s)
			}
			if n := e.Counter.Calls()["DynamoDB.GetItem"]; n != 0 {
				t.Fatalf("re-send %d: %d GetItem calls, want none", i+1, n)
			}
			if got := get(t, b, task.TaskID); got.Dispatches != i+1 {
				t.Fatalf("re-send %d: dispatches = %d", i+1, got.Dispatches)
			}
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 2 {
			t.Fatalf("queue holds %d messages, want the 2 re-sends", len(ids))
		}
	})
}

// TestRelayHeldBackByQueueBacklog: while the task queue holds a backlog, a
// queued task's message is most likely in it, so the relay backs off for
// the longest re-send backoff without a send (an outage shorter than that
// re-sends nothing); once the backlog is gone the next due run re-sends. A
// task with less age budget left is held for half of what is left, and
// still parked in time.
func TestRelayHeldBackByQueueBacklog(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		dt := ledger.DefaultDispatchTimeout
		withThreshold := func(h *reconciler.Handler) { h.BacklogThreshold = 3 }
		task := create(t, b, "behind-the-backlog")
		short := create(t, b, "short-lived", func(n *ledger.NewTask) { n.MaxAge = dt + 30*time.Second })
		backlog := &dispatch.Sender{SQS: e.SQS, QueueURL: e.Names.TaskQueueURL}
		for _, id := range []string{task.TaskID, short.TaskID, task.TaskID} {
			if err := backlog.Send(ctx, id, "", 0); err != nil {
				t.Fatal(err)
			}
		}

		b.clock.Advance(dt + time.Second)
		s := runTwice(t, b, withThreshold)
		if got := s[0].RelayDeferred + s[1].RelayDeferred; got != 2 || s[0].Resent+s[1].Resent != 0 {
			t.Fatalf("with a backlog of 3: summaries %+v, want both tasks held back, none re-sent", s)
		}
		if s[0].QueueBacklog != 3 && s[1].QueueBacklog != 3 {
			t.Fatalf("queue backlog seen: %d / %d, want 3", s[0].QueueBacklog, s[1].QueueBacklog)
		}
		got := get(t, b, task.TaskID)
		hold := b.l.Config().DispatchBackoffCap
		if got.Dispatches != 1 || got.DueAt != b.clock.Now().Add(hold).UnixMilli() {
			t.Fatalf("held back task: dispatches %d, due in %v; want 1 and the backoff cap %v", got.Dispatches,
				time.UnixMilli(got.DueAt).Sub(b.clock.Now()), hold)
		}
		// Held for half the time left to its age deadline, not the cap:
		// a lost send still goes with time left for the attempt.
		if sh := get(t, b, short.TaskID); sh.DueAt != b.clock.Now().Add(time.UnixMilli(sh.DeadlineMs).Sub(b.clock.Now())/2).UnixMilli() {
			t.Fatalf("short-lived task: due in %v, want half the %v left to its age deadline", time.UnixMilli(sh.DueAt).Sub(b.clock.Now()),
				time.UnixMilli(sh.DeadlineMs).Sub(b.clock.Now()))
		}

		// The backlog is consumed; the short-lived task's deadline passes.
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 3 {
			t.Fatalf("drained %d messages, want the 3 of the backlog", len(ids))
		}
		b.clock.Advance(hold + time.Second)
		s = runTwice(t, b, withThreshold)
		if got := s[0].Resent + s[1].Resent; got != 1 {
			t.Fatalf("without a backlog: summaries %+v, want exactly one re-send", s)
		}
		if got := s[0].Parked + s[1].Parked; got != 1 || get(t, b, short.TaskID).State != ledger.StateNeedsReview {
			t.Fatalf("short-lived task not parked at its age deadline: %+v", s)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 || ids[0] != task.TaskID {
			t.Fatalf("queue holds %v, want one message for %s", ids, task.TaskID)
		}
	})
}

// A task waiting to retry has its message in the queue too (the worker
// delayed its visibility to not_before): under a backlog its first due
// relay decision is held back like a queued task's, not re-sent behind
// the same backlog.
func TestRelayHoldsBackARetryBehindTheBacklog(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := retryBehindBacklog(t, b, "retry-behind-the-backlog")
		s := runTwice(t, b, func(h *reconciler.Handler) { h.BacklogThreshold = 3 })
		got := get(t, b, task.TaskID)
		if s[0].RelayDeferred+s[1].RelayDeferred != 1 || s[0].Resent+s[1].Resent != 0 || got.State != ledger.StateRetryWait ||
			got.DueAt != b.clock.Now().Add(b.l.Config().DispatchBackoffCap).UnixMilli() {
			t.Fatalf("summaries %+v; task %s due in %v; want it held back once for the backoff cap, nothing re-sent",
				s, got.State, time.UnixMilli(got.DueAt).Sub(b.clock.Now()))
		}
	})
}

// A first relay decision held back by a backlog never holds a task past
// the point where the walk can still find and park it in time: over
// remaining age budgets from none to twice the backoff cap, a queued
// task's new dispatch deadline lies between now and its age deadline, a
// retry's at most its age deadline less RelaySlack (the walk finds a
// retry that much after its due_at) and never back before now less
// RelaySlack (it would be found again at once); and the first run after
// each age deadline parks the task.
func TestRelayBacklogHoldStaysWithinTheAgeBudget(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		slack := reconciler.DefaultRelaySlack
		hold := b.l.Config().DispatchBackoffCap
		// Every task is created now; the first run is late enough for the
		// queued tasks (due after DispatchTimeout) and the retries (due a
		// second from now, found RelaySlack later) alike.
		firstRun := slack + 2*time.Second
		if dt := ledger.DefaultDispatchTimeout; firstRun <= dt {
			t.Fatalf("first run %v must come after the queued tasks' dispatch deadline %v", firstRun, dt)
		}
		type tc struct {
			name  string
			retry bool
			left  time.Duration // age budget left at the first run
			task  *ledger.Task
		}
		var cases []*tc
		for _, retry := range []bool{false, true} {
			for _, left := range []time.Duration{0, time.Millisecond, slack - time.Second, slack + time.Second, 2 * hold} {
				c := &tc{retry: retry, left: left, name: fmt.Sprintf("queued/%v", left)}
				if retry {
					c.name = fmt.Sprintf("retry_wait/%v", left)
				}
				c.task = create(t, b, "hold-"+c.name, func(n *ledger.NewTask) { n.MaxAge = firstRun + left })
				if retry {
					cl := claim(t, b, c.task.TaskID)
					if _, err := b.l.ScheduleRetry(ctx, c.task.TaskID, cl.AssignmentVersion, b.clock.Now().Add(time.Second), "transient", "503"); err != nil {
						t.Fatal(err)
					}
				}
				cases = append(cases, c)
			}
		}
		backlog := &dispatch.Sender{SQS: e.SQS, QueueURL: e.Names.TaskQueueURL}
		for range 3 {
			if err := backlog.Send(ctx, cases[0].task.TaskID, "", 0); err != nil {
				t.Fatal(err)
			}
		}
		withThreshold := func(h *reconciler.Handler) { h.BacklogThreshold = 3 }

		b.clock.Advance(firstRun)
		now := b.clock.Now().UnixMilli()
		runTwice(t, b, withThreshold)
		for _, c := range cases {
			got := get(t, b, c.task.TaskID)
			if c.left == 0 {
				// Out of age budget at the run: parked, not held.
				if got.State != ledger.StateNeedsReview {
					t.Errorf("%s: state %s at its age deadline, want needs_review", c.name, got.State)
				}
				continue
			}
			// The latest dispatch deadline the walk still finds before the
			// age deadline passes, and the earliest it may not find again
			// at once.
			latest, earliest := got.DeadlineMs, now
			if c.retry {
				latest -= slack.Milliseconds()
				earliest = min(now, latest)
			}
			if got.Dispatches != 1 || got.DueAt < earliest || got.DueAt > latest {
				t.Errorf("%s: dispatches %d, due in %v; want 1 and due in [%v, %v]", c.name, got.Dispatches,
					time.Duration(got.DueAt-now)*time.Millisecond, time.Duration(earliest-now)*time.Millisecond,
					time.Duration(latest-now)*time.Millisecond)
			}
			if hold := time.Duration(got.DueAt-now) * time.Millisecond; hold > max(c.left/2, 0) && hold > 0 {
				t.Errorf("%s: held %v with %v of age budget left, want at most half", c.name, hold, c.left)
			}
		}

		// The first run after each age deadline parks the task (runs in
		// between may re-send it; none may leave it live past its deadline).
		slices.SortFunc(cases, func(x, y *tc) int { return cmp.Compare(x.task.DeadlineMs, y.task.DeadlineMs) })
		for _, c := range cases {
			if d := time.UnixMilli(c.task.DeadlineMs + 1).Sub(b.clock.Now()); d > 0 {
				b.clock.Advance(d)
			}
			runTwice(t, b, withThreshold)
			if got := get(t, b, c.task.TaskID); got.State != ledger.StateNeedsReview {
				t.Errorf("%s: state %s (due in %v) in the first run past its age deadline, want needs_review", c.name, got.State,
					time.UnixMilli(got.DueAt).Sub(b.clock.Now()))
			}
		}
	})
}

// retryBehindBacklog creates a task waiting to retry in a second (its
// first attempt claimed and refused), queues three messages (a backlog at
// a BacklogThreshold of 3) and moves the clock to the retry's first due
// relay decision.
func retryBehindBacklog(t *testing.T, b *bundle, key string, opts ...func(*ledger.NewTask)) *ledger.Task {
	t.Helper()
	task := create(t, b, key, opts...)
	c := claim(t, b, task.TaskID)
	if _, err := b.l.ScheduleRetry(ctx, task.TaskID, c.AssignmentVersion, b.clock.Now().Add(time.Second), "transient", "503"); err != nil {
		t.Fatal(err)
	}
	backlog := &dispatch.Sender{SQS: b.env.SQS, QueueURL: b.env.Names.TaskQueueURL}
	for range 3 {
		if err := backlog.Send(ctx, task.TaskID, "", 0); err != nil {
			t.Fatal(err)
		}
	}
	b.clock.Advance(time.Second + reconciler.DefaultRelaySlack + time.Second)
	return task
}
