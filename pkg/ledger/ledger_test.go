package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type bundle struct {
	env   *testenv.Env
	l     *ledger.Ledger
	clock *testenv.Clock
}

func setup(t *testing.T, e *testenv.Env, mod ...func(*ledger.Config)) *bundle {
	t.Helper()
	c := testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	cfg := ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, Now: c.Now}
	for _, m := range mod {
		m(&cfg)
	}
	l, err := ledger.New(e.DDB, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{env: e, l: l, clock: c}
}

func newTask(key, payload string) ledger.NewTask {
	return ledger.NewTask{Scope: "alice", IdempotencyKey: key, Kind: "generate",
		Input: `{"prompt":"` + payload + `"}`, PayloadSHA256: "sha-" + payload}
}

func mustCreate(t *testing.T, b *bundle, key string) *ledger.Task {
	t.Helper()
	task, err := b.l.Create(context.Background(), newTask(key, "p"))
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	return task
}

func TestCreateConcurrentSameKey(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		const n = 50
		var wg sync.WaitGroup
		ids := make([]string, n)
		created := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				task, err := b.l.Create(context.Background(), newTask("k1", "same"))
				var dup *ledger.DuplicateError
				switch {
				case err == nil:
					ids[i], created[i] = task.TaskID, true
				case errors.As(err, &dup):
					ids[i] = dup.Task.TaskID
				default:
					errs[i] = err
				}
			}()
		}
		wg.Wait()
		wins := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("caller %d: %v", i, errs[i])
			}
			if created[i] {
				wins++
			}
			if ids[i] != ledger.TaskID("alice", "k1") {
				t.Fatalf("caller %d saw task %q", i, ids[i])
			}
		}
		if wins != 1 {
			t.Fatalf("%d callers created the task, want exactly 1", wins)
		}
		got, err := b.l.Get(context.Background(), ids[0])
		if err != nil || got.State != ledger.StateQueued || got.PayloadSHA256 != "sha-same" {
			t.Fatalf("stored task = %+v, %v", got, err)
		}
	})
}

func TestCreateRaceDifferentPayloads(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		const n = 12
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winner string
		mismatches := 0
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := fmt.Sprintf("payload-%d", i)
				_, err := b.l.Create(context.Background(), newTask("k2", p))
				var mm *ledger.PayloadMismatchError
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					if winner != "" {
						t.Errorf("two winners: %s and %s", winner, p)
					}
					winner = p
				case errors.As(err, &mm):
					mismatches++
				default:
					t.Errorf("caller %d: unexpected %v", i, err)
				}
			}()
		}
		wg.Wait()
		if winner == "" || mismatches != n-1 {
			t.Fatalf("winner %q, %d mismatches; want one winner and %d mismatches", winner, mismatches, n-1)
		}
		got, err := b.l.Get(context.Background(), ledger.TaskID("alice", "k2"))
		if err != nil || got.PayloadSHA256 != "sha-"+winner {
			t.Fatalf("stored payload %v, %v; want the winner's %s", got, err, winner)
		}
		// A replay of the winner's payload is a duplicate, another is a mismatch.
		if _, err := b.l.Create(context.Background(), newTask("k2", winner)); !errors.As(err, new(*ledger.DuplicateError)) {
			t.Fatalf("replay: %v", err)
		}
	})
}

func TestClaimConcurrentOneHolder(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := mustCreate(t, b, "k3")
		const n = 20
		var wg sync.WaitGroup
		var mu sync.Mutex
		holders := map[int64][]string{}
		leased := 0
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("w%d", i)
				got, err := b.l.Claim(context.Background(), task.TaskID, ledger.ClaimOptions{Owner: owner, Lease: time.Minute})
				mu.Lock()
				defer mu.Unlock()
				var nc *ledger.NotClaimableError
				switch {
				case err == nil:
					holders[got.AssignmentVersion] = append(holders[got.AssignmentVersion], owner)
				case errors.As(err, &nc) && nc.Reason == ledger.ReasonLeased:
					leased++
				default:
					t.Errorf("claim %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if len(holders) != 1 || len(holders[1]) != 1 || leased != n-1 {
			t.Fatalf("holders per version %v, leased %d; want one holder of version 1", holders, leased)
		}
		got, _ := b.l.Get(context.Background(), task.TaskID)
		if got.Attempts != 1 || got.AssignmentVersion != 1 || got.LeaseOwner != holders[1][0] {
			t.Fatalf("task after claims: attempts %d version %d owner %s", got.Attempts, got.AssignmentVersion, got.LeaseOwner)
		}
	})
}

func TestStaleHolderFencedAfterTakeover(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "k4")
		old, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "old", Lease: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		// Without takeover permission, an expired lease is not claimable.
		b.clock.Advance(11 * time.Second)
		if _, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "new", Lease: time.Minute}); !isReason(err, ledger.ReasonExpiredLease) {
			t.Fatalf("claim of expired lease without takeover: %v", err)
		}
		cur, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "new", Lease: time.Minute, AllowTakeover: true})
		if err != nil {
			t.Fatal(err)
		}
		if cur.AssignmentVersion != old.AssignmentVersion+1 {
			t.Fatalf("takeover version %d, want %d", cur.AssignmentVersion, old.AssignmentVersion+1)
		}
		// The stale holder's heartbeat and completion are fenced.
		var fe *ledger.FencedError
		if _, err := b.l.Renew(ctx, task.TaskID, old.AssignmentVersion, time.Minute); !errors.As(err, &fe) || fe.Why != "taken_over" {
			t.Fatalf("stale renew: %v", err)
		}
		if _, err := b.l.Complete(ctx, task.TaskID, old.AssignmentVersion, ledger.Completion{Result: `{"text":"stale"}`}); !errors.As(err, &fe) || fe.Why != "taken_over" {
			t.Fatalf("stale complete: %v", err)
		}
		done, err := b.l.Complete(ctx, task.TaskID, cur.AssignmentVersion, ledger.Completion{Result: `{"text":"fresh"}`, Provider: "sim", ProviderRef: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if done.State != ledger.StateCompleted || done.Result != `{"text":"fresh"}` || done.StateShard != "" || done.DueAt != 0 || done.ExpiresAt == 0 {
			t.Fatalf("completed task: %+v", done)
		}
		// Stale completion after the fresh one: still fenced, result unchanged.
		if _, err := b.l.Complete(ctx, task.TaskID, old.AssignmentVersion, ledger.Completion{Result: `{"text":"stale"}`}); !errors.As(err, &fe) {
			t.Fatalf("stale complete after completion: %v", err)
		}
		// The holder completing twice learns it already completed.
		if _, err := b.l.Complete(ctx, task.TaskID, cur.AssignmentVersion, ledger.Completion{Result: `{"text":"again"}`}); !errors.As(err, &fe) || fe.Why != "already_completed" {
			t.Fatalf("double complete: %v", err)
		}
		got, _ := b.l.Get(ctx, task.TaskID)
		if got.Result != `{"text":"fresh"}` {
			t.Fatalf("saved result %s, want the new holder's", got.Result)
		}
	})
}

func isReason(err error, reason string) bool {
	var nc *ledger.NotClaimableError
	return errors.As(err, &nc) && nc.Reason == reason
}

func TestRetryWaitAndBudget(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		n := newTask("k5", "p")
		n.MaxAttempts = 2
		task, err := b.l.Create(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		c1, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "a", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		rw, err := b.l.ScheduleRetry(ctx, task.TaskID, c1.AssignmentVersion, b.clock.Now().Add(5*time.Second), "transient", "503")
		if err != nil || rw.State != ledger.StateRetryWait || rw.LeaseOwner != "" {
			t.Fatalf("retry: %+v %v", rw, err)
		}
		if _, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "b"}); !isReason(err, ledger.ReasonNotDue) {
			t.Fatalf("early claim: %v", err)
		}
		b.clock.Advance(6 * time.Second)
		c2, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "b"})
		if err != nil || c2.Attempts != 2 {
			t.Fatalf("due claim: %+v %v", c2, err)
		}
		if _, err := b.l.ScheduleRetry(ctx, task.TaskID, c2.AssignmentVersion, b.clock.Now(), "transient", "503"); err != nil {
			t.Fatal(err)
		}
		var nc *ledger.NotClaimableError
		if _, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "c"}); !errors.As(err, &nc) || nc.Reason != ledger.ReasonBudgetExhausted || nc.Budget != "max_attempts" {
			t.Fatalf("claim past budget: %v", err)
		}
		// Age budget.
		n2 := newTask("k5b", "p")
		n2.MaxAge = time.Minute
		t2, _ := b.l.Create(ctx, n2)
		b.clock.Advance(2 * time.Minute)
		if _, err := b.l.Claim(ctx, t2.TaskID, ledger.ClaimOptions{Owner: "c"}); !errors.As(err, &nc) || nc.Budget != "max_age" {
			t.Fatalf("claim past age: %v", err)
		}
	})
}

func TestFailUnknownCancel(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		a := mustCreate(t, b, "k6a")
		ca, _ := b.l.Claim(ctx, a.TaskID, ledger.ClaimOptions{Owner: "w"})
		f, err := b.l.Fail(ctx, a.TaskID, ca.AssignmentVersion, "permanent_input", "prompt too long")
		if err != nil || f.State != ledger.StateFailed || f.ErrorMessage != "prompt too long" || f.ExpiresAt == 0 {
			t.Fatalf("fail: %+v %v", f, err)
		}
		if _, err := b.l.Claim(ctx, a.TaskID, ledger.ClaimOptions{Owner: "w"}); !isReason(err, ledger.ReasonTerminal) {
			t.Fatalf("claim of failed task: %v", err)
		}
		u := mustCreate(t, b, "k6u")
		cu, _ := b.l.Claim(ctx, u.TaskID, ledger.ClaimOptions{Owner: "w"})
		un, err := b.l.MarkUnknown(ctx, u.TaskID, cu.AssignmentVersion, "unknown_outcome", "deadline after send")
		if err != nil || un.State != ledger.StateUnknown || un.StateShard == "" {
			t.Fatalf("unknown: %+v %v", un, err)
		}
		if _, err := b.l.Claim(ctx, u.TaskID, ledger.ClaimOptions{Owner: "w", AllowTakeover: true}); !isReason(err, ledger.ReasonUnknown) {
			t.Fatalf("claim of unknown: %v", err)
		}
		rb, err := b.l.CompleteFromReadback(ctx, u.TaskID, un.AssignmentVersion, ledger.Completion{Result: `{"text":"x"}`, Provider: "sim"})
		if err != nil || rb.State != ledger.StateCompleted || rb.ReadbackAt == "" {
			t.Fatalf("readback completion: %+v %v", rb, err)
		}
		c := mustCreate(t, b, "k6c")
		cc, err := b.l.Cancel(ctx, c.TaskID)
		if err != nil || cc.State != ledger.StateCancelled {
			t.Fatalf("cancel: %+v %v", cc, err)
		}
		if again, err := b.l.Cancel(ctx, c.TaskID); err != nil || again.State != ledger.StateCancelled {
			t.Fatalf("second cancel should be a no-op: %v", err)
		}
		var ce *ledger.ConflictError
		if _, err := b.l.Cancel(ctx, a.TaskID); !errors.As(err, &ce) || ce.State != ledger.StateFailed {
			t.Fatalf("cancel failed task: %v", err)
		}
		if _, err := b.l.Cancel(ctx, ledger.TaskID("alice", "nope")); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("cancel missing task: %v", err)
		}
	})
}

func TestParkAllOrNothing(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "k7")
		c, _ := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w"})
		rev := ledger.Review{Reason: ledger.ReviewProviderConfig, Summary: "The provider rejected our credentials.",
			Known: []string{"401 from provider"}, SafeActions: []string{"fix credentials, then retry"}}
		// Wrong version: nothing is written, neither the task nor the item.
		if _, err := b.l.Park(ctx, c, ledger.ParkOptions{State: ledger.StateRunning, Version: c.AssignmentVersion + 1}, rev); err == nil {
			t.Fatal("park with a stale version succeeded")
		}
		if _, err := b.l.GetReview(ctx, task.TaskID); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("review item written by a failed park: %v", err)
		}
		if got, _ := b.l.Get(ctx, task.TaskID); got.State != ledger.StateRunning {
			t.Fatalf("task changed by a failed park: %s", got.State)
		}
		// Two parkers race: exactly one wins, the other sees it parked.
		var wg sync.WaitGroup
		results := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, results[i] = b.l.Park(ctx, c, ledger.ParkOptions{State: ledger.StateRunning, Version: c.AssignmentVersion}, rev)
			}()
		}
		wg.Wait()
		ok, parked := 0, 0
		for _, err := range results {
			switch {
			case err == nil:
				ok++
			case ledger.IsAlreadyParked(err):
				parked++
			default:
				t.Fatalf("park: %v", err)
			}
		}
		if ok != 1 || parked != 1 {
			t.Fatalf("%d parks succeeded and %d saw it parked; want 1 and 1", ok, parked)
		}
		got, _ := b.l.Get(ctx, task.TaskID)
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil || got.State != ledger.StateNeedsReview || r.ReviewStatus != ledger.ReviewOpen || r.ParkCount != 1 || r.Attempts != 1 || got.StateShard != "" {
			t.Fatalf("after park: task %+v review %+v %v", got, r, err)
		}
		open, _, err := tasklist.ListOpenReviews(ctx, b.l, 10, "")
		if err != nil || len(open) != 1 || open[0].TaskID != task.TaskID {
			t.Fatalf("open reviews %+v %v", open, err)
		}
	})
}

func TestOperatorActions(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		park := func(key string) *ledger.Task {
			task := mustCreate(t, b, key)
			c, _ := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w"})
			p, err := b.l.Park(ctx, c, ledger.ParkOptions{State: ledger.StateRunning, Version: c.AssignmentVersion},
				ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "s"})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		p := park("k8")
		if _, _, _, err := b.l.Act(ctx, p.TaskID, ledger.OperatorAction{Resolution: "completed", By: "ops"}); !errors.Is(err, ledger.ErrInvalidAction) {
			t.Fatalf("resolve without evidence: %v", err)
		}
		r, task, replayed, err := b.l.Act(ctx, p.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops", Note: "provider fixed"})
		if err != nil || replayed || r.ReviewStatus != ledger.ReviewResolved || r.ResolvedBy != "ops" || task.State != ledger.StateQueued || task.Attempts != 0 || task.StateShard == "" {
			t.Fatalf("retry: %+v %+v %v %v", r, task, replayed, err)
		}
		_, task2, replayed, err := b.l.Act(ctx, p.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops"})
		if err != nil || !replayed || task2.State != ledger.StateQueued {
			t.Fatalf("second retry should be a no-op: %v %v", replayed, err)
		}
		var ce *ledger.ConflictError
		if _, _, _, err := b.l.Act(ctx, p.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops", Note: "x"}); !errors.As(err, &ce) {
			t.Fatalf("conflicting action: %v", err)
		}
		// The retried task can be claimed again with a fresh budget.
		if c, err := b.l.Claim(ctx, p.TaskID, ledger.ClaimOptions{Owner: "w2"}); err != nil || c.Attempts != 1 {
			t.Fatalf("claim after retry: %+v %v", c, err)
		}
		q := park("k9")
		_, done, _, err := b.l.Act(ctx, q.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionCompleted, By: "ops", Note: "saw the email in the outbox"})
		if err != nil || done.State != ledger.StateCompleted || done.Result == "" {
			t.Fatalf("resolve completed: %+v %v", done, err)
		}
		if _, _, replayed, err := b.l.Act(ctx, q.TaskID, ledger.OperatorAction{Resolution: ledger.ResolutionCompleted, By: "ops", Note: "again"}); err != nil || !replayed {
			t.Fatalf("second resolve: %v %v", replayed, err)
		}
		open, _, _ := tasklist.ListOpenReviews(ctx, b.l, 10, "")
		if len(open) != 0 {
			t.Fatalf("open reviews after resolving all: %d", len(open))
		}
		// Poison items close without a task.
		if _, err := b.l.PutPoison(ctx, ledger.Review{MessageID: "m1", Summary: "not a task reference", BodySHA256: "abc", BodyBytes: 3}); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := b.l.Act(ctx, ledger.PoisonID("m1"), ledger.OperatorAction{Resolution: ledger.ResolutionRetry, By: "ops"}); !errors.Is(err, ledger.ErrInvalidAction) {
			t.Fatalf("retry poison: %v", err)
		}
		if r, _, _, err := b.l.Act(ctx, ledger.PoisonID("m1"), ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops", Note: "garbage from a test producer"}); err != nil || r.ReviewStatus != ledger.ReviewResolved {
			t.Fatalf("resolve poison: %+v %v", r, err)
		}
	})
}

func TestDueAtNeverPastAgeDeadline(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		n := newTask("k10", "p")
		n.MaxAge = ledger.DefaultDispatchTimeout * 3 / 4 // shorter than the dispatch timeout
		task, err := b.l.Create(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if task.DueAt != task.DeadlineMs {
			t.Fatalf("created due_at %d, want the age deadline %d", task.DueAt, task.DeadlineMs)
		}
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(20 * time.Second)
		rq, err := b.l.Requeue(ctx, task.TaskID, ledger.StateRunning, c.AssignmentVersion)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := b.l.Get(ctx, task.TaskID)
		if rq.DueAt != task.DeadlineMs || got.DueAt != task.DeadlineMs {
			t.Fatalf("requeued due_at %d (stored %d), want the age deadline %d", rq.DueAt, got.DueAt, task.DeadlineMs)
		}
	})
}
