package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestWorkerDeadBeforeFirstHeartbeatAfterResendsIsFoundAtItsLeaseEnd: a
// queued task whose submit send was lost is re-sent by the outbox relay,
// which backs its dispatch deadline off (30 s, 1, 2, 4 min). A worker then
// claims it from the last re-send and dies before its first heartbeat. The
// claim keeps due_at, and docs/timing.md says such a worker "is found at
// that deadline, and the dispatch timeout is the default lease (30 s) for
// it to be about the lease's end". After re-sends that deadline is up to
// 8 × the dispatch timeout away, not about the lease's end: the task must
// be recovered by the first reconciler run after its lease end plus grace
// plus one period, as it was when running tasks were indexed by their lease.
func TestWorkerDeadBeforeFirstHeartbeatAfterResendsIsFoundAtItsLeaseEnd(t *testing.T) {
	t.Parallel()
	const (
		period = time.Minute
		lease  = 30 * time.Second
	)
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "dead-after-resends") // the submit's send was lost
		// The relay re-sends at each deadline; nobody consumes the messages
		// (a backlog, a slow event source) until the third re-send.
		for got := get(t, b, task.TaskID); got.Dispatches < 3; got = get(t, b, task.TaskID) {
			b.clock.Set(time.UnixMilli(got.DueAt + 1))
			handle(t, b.handler())
			e.DrainTaskIDs(t, e.Names.TaskQueueURL)
		}
		queued := get(t, b, task.TaskID)
		t.Logf("after %d re-sends: due_at now%+.0fs", queued.Dispatches, float64(queued.DueAt-b.clock.Now().UnixMilli())/1000)
		c := claim(t, b, task.TaskID) // …and the worker dies before its first heartbeat
		awaitRecoveredByLeaseEnd(t, b, c, period, "found only at the dispatch deadline its task was re-sent with")
	})
}

// awaitRecoveredByLeaseEnd runs the reconciler every period until the claim
// c of a dead worker is recovered (the task no longer running at c's
// version), and fails if it is not by the first run after c's lease end
// plus grace plus one period.
func awaitRecoveredByLeaseEnd(t *testing.T, b *bundle, c *ledger.Task, period time.Duration, why string) {
	t.Helper()
	found := time.UnixMilli(c.LeaseUntil).Add(reconciler.DefaultGrace + period)
	var s reconciler.Summary
	for at := b.clock.Now().Add(period); !at.After(found); at = at.Add(period) {
		b.clock.Set(at)
		s = handle(t, b.handler())
		if got := get(t, b, c.TaskID); got.State != ledger.StateRunning || got.AssignmentVersion != c.AssignmentVersion {
			return
		}
	}
	got := get(t, b, c.TaskID)
	t.Fatalf("a dead worker's claim (lease ended %s ago) is still %s at version %d, due_at %+.0fs from now: %s (last run %+v)",
		b.clock.Now().Sub(time.UnixMilli(c.LeaseUntil)), got.State, got.AssignmentVersion, float64(got.DueAt-b.clock.Now().UnixMilli())/1000, why, s)
}

// TestWorkerDeadBeforeFirstHeartbeatOfAResentRetryIsFoundAtItsLeaseEnd:
// docs/timing.md says a claim from retry_wait "keeps its past not_before"
// as due_at, so the reconciler looks at it at once. A retry_wait task whose
// message was lost is re-sent by the relay, which moves due_at to the
// backed-off dispatch deadline (ClaimDispatch): a worker claiming it from
// that re-send and dying before its first heartbeat must still be recovered
// by the first run after its lease end plus grace plus one period.
func TestWorkerDeadBeforeFirstHeartbeatOfAResentRetryIsFoundAtItsLeaseEnd(t *testing.T) {
	t.Parallel()
	const period = time.Minute
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "dead-after-retry-resends")
		c := claim(t, b, task.TaskID)
		if _, err := b.l.ScheduleRetry(ctx, task.TaskID, c.AssignmentVersion, b.clock.Now().Add(10*time.Second), "transient", "503"); err != nil {
			t.Fatal(err)
		}
		// The retry's message is lost; the relay re-sends it until the
		// third re-send, which a worker finally receives.
		for got := get(t, b, task.TaskID); got.Dispatches < 3; got = get(t, b, task.TaskID) {
			b.clock.Set(time.UnixMilli(got.DueAt).Add(reconciler.DefaultRelaySlack + time.Millisecond))
			handle(t, b.handler())
			e.DrainTaskIDs(t, e.Names.TaskQueueURL)
		}
		c2 := claim(t, b, task.TaskID) // from retry_wait; the worker dies before its first heartbeat
		awaitRecoveredByLeaseEnd(t, b, c2, period, "a claim from retry_wait found only at its re-sent dispatch deadline")
	})
}

// TestWorkerDeadBeforeFirstHeartbeatIsFoundAtItsLeaseEndWhateverTheDispatchTimeout:
// a deployment may set a dispatch timeout of several leases (a queue that
// is slow to drain, so that the relay does not re-send what is merely
// waiting). A worker claiming such a task at once and dying before its
// first heartbeat must still be recovered by the first reconciler run
// after its lease end plus grace plus one period: how soon a dead worker
// is found is the lease's business, not the dispatch timeout's.
func TestWorkerDeadBeforeFirstHeartbeatIsFoundAtItsLeaseEndWhateverTheDispatchTimeout(t *testing.T) {
	t.Parallel()
	const (
		period = time.Minute
		lease  = 30 * time.Second
	)
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, Now: b.clock.Now,
			Shards: testShards, DispatchTimeout: 10 * lease})
		if err != nil {
			t.Fatal(err)
		}
		b.l = l
		task := create(t, b, "dead-long-dispatch-timeout")
		c := claim(t, b, task.TaskID) // at once; the worker dies before its first heartbeat
		awaitRecoveredByLeaseEnd(t, b, c, period, "found only at its dispatch deadline")
	})
}
