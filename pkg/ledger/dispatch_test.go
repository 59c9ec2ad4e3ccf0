package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestDispatchBackoffDoublesUpToTheCap(t *testing.T) {
	t.Parallel()
	l, err := ledger.New(nil, ledger.Config{TasksTable: "t", ReviewTable: "r",
		DispatchTimeout: 10 * time.Second, DispatchBackoffCap: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	for n, w := range want {
		if got := l.DispatchBackoff(n); got != w {
			t.Errorf("DispatchBackoff(%d) = %v, want %v", n, got, w)
		}
	}
	if got := l.DispatchBackoff(1 << 20); got != time.Minute {
		t.Errorf("DispatchBackoff(huge) = %v, want the cap", got)
	}
	d, err := ledger.New(nil, ledger.Config{TasksTable: "t", ReviewTable: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Config().DispatchBackoffCap; c != ledger.DefaultDispatchBackoffFactor*ledger.DefaultDispatchTimeout {
		t.Errorf("default cap = %v", c)
	}
}

// TestClaimDispatchBacksOff: each re-send of a task whose message is not
// consumed doubles the wait for the next one, so a backlog older than the
// dispatch timeout does not re-send every task every DispatchTimeout.
func TestClaimDispatchBacksOff(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, func(c *ledger.Config) { c.DispatchTimeout = time.Minute; c.DispatchBackoffCap = 5 * time.Minute })
		ctx := context.Background()
		task := mustCreate(t, b, "backoff")
		if want := b.clock.Now().Add(time.Minute).UnixMilli(); task.DueAt != want {
			t.Fatalf("created due_at %d, want %d", task.DueAt, want)
		}
		cur := task
		for i, wait := range []time.Duration{2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute} {
			b.clock.Set(time.UnixMilli(cur.DueAt).Add(time.Second))
			got, ok, err := b.l.ClaimDispatch(ctx, cur)
			if err != nil || !ok {
				t.Fatalf("dispatch %d: ok=%t err=%v", i+1, ok, err)
			}
			if got.Dispatches != i+1 || got.DueAt != b.clock.Now().Add(wait).UnixMilli() || got.State != ledger.StateQueued {
				t.Fatalf("dispatch %d: dispatches %d due in %v, want %d and %v", i+1, got.Dispatches,
					time.UnixMilli(got.DueAt).Sub(b.clock.Now()), i+1, wait)
			}
			stored, err := b.l.Get(ctx, task.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			if stored.DueAt != got.DueAt || stored.Dispatches != got.Dispatches {
				t.Fatalf("stored due_at %d dispatches %d, returned %d %d", stored.DueAt, stored.Dispatches, got.DueAt, got.Dispatches)
			}
			// The read it was based on is stale now: a second claim fails.
			if _, ok, err := b.l.ClaimDispatch(ctx, cur); ok || err != nil {
				t.Fatalf("dispatch %d claimed twice from the same read (err %v)", i+1, err)
			}
			cur = got
		}
	})
}

// TestClaimDispatchClampsToTheAgeDeadline: the next dispatch deadline never
// lies past the task's age deadline, so the reconciler parks it in time.
func TestClaimDispatchClampsToTheAgeDeadline(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		n := newTask("clamp", "p")
		n.MaxAge = 3 * ledger.DefaultDispatchTimeout / 2 // the next backoff (2 × the timeout) overshoots it
		task, err := b.l.Create(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		got, ok, err := b.l.ClaimDispatch(ctx, task)
		if err != nil || !ok {
			t.Fatalf("ok=%t err=%v", ok, err)
		}
		stored, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if got.DueAt != task.DeadlineMs || stored.DueAt != task.DeadlineMs {
			t.Fatalf("due_at %d (stored %d), want the age deadline %d", got.DueAt, stored.DueAt, task.DeadlineMs)
		}
	})
}

// TestClaimDispatchRaceHasOneWinner: of many relays that read the same due
// task, exactly one wins the right to send.
func TestClaimDispatchRaceHasOneWinner(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "race")
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		const n = 8
		var wg sync.WaitGroup
		wins := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				read := *task
				_, wins[i], errs[i] = b.l.ClaimDispatch(ctx, &read)
			}()
		}
		wg.Wait()
		won := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("relay %d: %v", i, errs[i])
			}
			if wins[i] {
				won++
			}
		}
		stored, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if won != 1 || stored.Dispatches != 1 {
			t.Fatalf("%d winners, dispatches %d; want exactly 1", won, stored.Dispatches)
		}
	})
}

// TestReleaseGivesTheAttemptBack: a released assignment made no provider
// call, so it does not count against the attempt budget; the released
// holder stays fenced.
func TestReleaseGivesTheAttemptBack(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "release")
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c.Attempts != 1 {
			t.Fatalf("claimed attempts %d", c.Attempts)
		}
		r, err := b.l.Release(ctx, task.TaskID, c.AssignmentVersion)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != ledger.StateQueued || r.Attempts != 0 || r.LeaseOwner != "" || r.AssignmentVersion != c.AssignmentVersion {
			t.Fatalf("released: state %s attempts %d owner %q version %d", r.State, r.Attempts, r.LeaseOwner, r.AssignmentVersion)
		}
		if _, err := b.l.Complete(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{}`}); !isFenced(err) {
			t.Fatalf("the released holder completed: %v", err)
		}
		if _, err := b.l.Release(ctx, task.TaskID, c.AssignmentVersion); !isFenced(err) {
			t.Fatalf("released twice: %v", err)
		}
		again, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if again.Attempts != 1 || again.AssignmentVersion != c.AssignmentVersion+1 {
			t.Fatalf("reclaimed: attempts %d version %d", again.Attempts, again.AssignmentVersion)
		}
	})
}

func isFenced(err error) bool {
	var fe *ledger.FencedError
	return errors.As(err, &fe)
}
