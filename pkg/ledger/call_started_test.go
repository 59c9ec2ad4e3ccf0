package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestMarkCallStartedIsFenced: the call-start mark is written only by the
// holder of the running assignment, renews a lease shorter than half a
// lease, and is left alone by the next Claim, so it equals the assignment
// version only when the current assignment's call started.
func TestMarkCallStartedIsFenced(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "call-started")
		c1, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c1.CallStartedVersion != 0 {
			t.Fatalf("a fresh claim carries call_started_version %d", c1.CallStartedVersion)
		}
		b.clock.Advance(10 * time.Second)
		m, err := b.l.MarkCallStarted(ctx, task.TaskID, c1.AssignmentVersion, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// 20 s of the claim's lease left, under half the mark's minute: the
		// mark renews it, and due_at follows (the lease end: no age
		// deadline given, no rounding).
		wantUntil := b.clock.Now().Add(time.Minute).UnixMilli()
		wantDue := wantUntil
		if m.CallStartedVersion != c1.AssignmentVersion || m.State != ledger.StateRunning || m.Attempts != 1 ||
			m.LeaseUntil != wantUntil || m.DueAt != wantDue {
			t.Fatalf("marked task: call_started_version %d (want %d), state %s, attempts %d, lease_until %d (want %d), due_at %d (want %d)",
				m.CallStartedVersion, c1.AssignmentVersion, m.State, m.Attempts, m.LeaseUntil, wantUntil, m.DueAt, wantDue)
		}

		// The attempt is given back and claimed anew: the mark stays at the
		// old version, so it does not speak for the new assignment.
		if _, err := b.l.Release(ctx, task.TaskID, c1.AssignmentVersion); err != nil {
			t.Fatal(err)
		}
		c2, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w2", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c2.CallStartedVersion != c1.AssignmentVersion || c2.AssignmentVersion == c2.CallStartedVersion {
			t.Fatalf("after a new claim: call_started_version %d, version %d; want the old mark %d kept and unequal",
				c2.CallStartedVersion, c2.AssignmentVersion, c1.AssignmentVersion)
		}

		// The old holder is fenced and writes nothing.
		_, err = b.l.MarkCallStarted(ctx, task.TaskID, c1.AssignmentVersion, time.Minute)
		var fe *ledger.FencedError
		if !errors.As(err, &fe) || fe.Why != "taken_over" {
			t.Fatalf("stale MarkCallStarted = %v, want *FencedError taken_over", err)
		}
		if got := mustGet(t, b, task.TaskID); got.CallStartedVersion != c1.AssignmentVersion || got.LeaseOwner != "w2" {
			t.Fatalf("a fenced mark changed the task: call_started_version %d, owner %q", got.CallStartedVersion, got.LeaseOwner)
		}

		// Not running any more: fenced too.
		if _, err := b.l.Complete(ctx, task.TaskID, c2.AssignmentVersion, ledger.Completion{Result: `{"text":"hi"}`}); err != nil {
			t.Fatal(err)
		}
		_, err = b.l.MarkCallStarted(ctx, task.TaskID, c2.AssignmentVersion, time.Minute)
		if !errors.As(err, &fe) || fe.Why != "already_completed" {
			t.Fatalf("MarkCallStarted on a completed task = %v, want *FencedError already_completed", err)
		}
	})
}

// TestMarkCallStartedRecognisesALostReply: a mark whose reply was lost
// (inside the SDK's retries, or after them) is returned as written, never
// as a fence.
func TestMarkCallStartedRecognisesALostReply(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := mustCreate(t, b, "call-started-lost-"+mode)
		claimed, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "me", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		l, arm, lost := lossy(t, b, mode, "UpdateItem")
		arm()
		got, err := l.MarkCallStarted(ctx, task.TaskID, claimed.AssignmentVersion, time.Minute, ledger.WithNonce(ledger.NewNonce()))
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("MarkCallStarted after a lost reply = %v; want its own write recognised", err)
		}
		if got.CallStartedVersion != claimed.AssignmentVersion || got.State != ledger.StateRunning {
			t.Fatalf("returned call_started_version %d state %s, want %d running", got.CallStartedVersion, got.State, claimed.AssignmentVersion)
		}
		if stored := mustGet(t, b, task.TaskID); stored.CallStartedVersion != claimed.AssignmentVersion {
			t.Fatalf("stored call_started_version %d, want %d", stored.CallStartedVersion, claimed.AssignmentVersion)
		}
	})
}

// TestMarkCallStartedLeavesTheIndexEntry: right after the claim (more than
// half a lease left) the mark sets call_started_version and nothing the
// by_state index holds — not its key (state_shard, due_at), not the
// projected lease_until — so it bills no index write. With less than half
// a lease left it renews the lease (a second write, after the first failed
// its condition on the lease alone), and a lost reply of that second write
// is still recognised as the caller's own.
func TestMarkCallStartedLeavesTheIndexEntry(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "mark-index")
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(14 * time.Second) // 16 s left: more than half of 30 s
		m, err := b.l.MarkCallStarted(ctx, task.TaskID, c.AssignmentVersion, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []*ledger.Task{m, mustGet(t, b, task.TaskID)} {
			if got.CallStartedVersion != c.AssignmentVersion || got.LeaseUntil != c.LeaseUntil || got.DueAt != c.DueAt ||
				got.StateShard != c.StateShard || got.LeaseOwner != "w" || got.State != ledger.StateRunning {
				t.Fatalf("marked with a fresh lease: call_started_version %d, lease_until %d (claim's %d), due_at %d (claim's %d), shard %q (claim's %q), owner %q, state %s; want the mark alone",
					got.CallStartedVersion, got.LeaseUntil, c.LeaseUntil, got.DueAt, c.DueAt, got.StateShard, c.StateShard, got.LeaseOwner, got.State)
			}
		}
	})
	for _, mode := range []string{sdkRetry, exhausted} {
		t.Run("short lease, renewing write's reply lost, "+mode, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				ctx := context.Background()
				task := mustCreate(t, b, "mark-short-"+mode)
				c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				b.clock.Advance(16 * time.Second) // 14 s left: under half a lease
				l, lost := loseNth(t, b, mode, "UpdateItem", 2)
				m, err := l.MarkCallStarted(ctx, task.TaskID, c.AssignmentVersion, 30*time.Second, ledger.WithNonce(ledger.NewNonce()))
				if !lost() {
					t.Fatal("the renewing write's reply was not lost")
				}
				if err != nil {
					t.Fatalf("MarkCallStarted, renewing write's reply lost = %v; want its own write recognised", err)
				}
				wantUntil := b.clock.Now().Add(30 * time.Second).UnixMilli()
				for _, got := range []*ledger.Task{m, mustGet(t, b, task.TaskID)} {
					if got.CallStartedVersion != c.AssignmentVersion || got.LeaseUntil != wantUntil || got.DueAt < wantUntil || got.DueAt >= wantUntil+30_000 {
						t.Fatalf("marked with a short lease: call_started_version %d, lease_until %d (want %d renewed), due_at %d (want in [%d, +30 s))",
							got.CallStartedVersion, got.LeaseUntil, wantUntil, got.DueAt, wantUntil)
					}
				}
			})
		})
	}
}

// TestRenewMovesDueAtByWholeLeases: a renewal sets lease_until to now +
// lease and due_at to the next multiple of the lease at or after it, so a
// heartbeat's renewals every lease/3 change the index key once a lease,
// never to before the lease's end.
func TestRenewMovesDueAtByWholeLeases(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		const lease = 30 * time.Second
		k := b.clock.Now().UnixMilli()/30_000 + 1
		b.clock.Set(time.UnixMilli(k*30_000 + 1_000)) // 1 s past a multiple
		task := mustCreate(t, b, "renew-due")
		c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		dues := []int64{}
		for range 4 {
			b.clock.Advance(lease / 3)
			r, err := b.l.Renew(ctx, task.TaskID, c.AssignmentVersion, lease, ledger.WithAgeDeadline(c.DeadlineMs))
			if err != nil {
				t.Fatal(err)
			}
			if want := b.clock.Now().Add(lease).UnixMilli(); r.LeaseUntil != want || r.DueAt < r.LeaseUntil || r.DueAt%30_000 != 0 {
				t.Fatalf("renewed: lease_until %d (want %d), due_at %d (want the next multiple of 30 s at or after it)", r.LeaseUntil, want, r.DueAt)
			}
			dues = append(dues, r.DueAt)
		}
		// Lease ends at k·30 s + 41, 51, 61, 71 s: due at +60, +60, +90, +90.
		want := []int64{k*30_000 + 60_000, k*30_000 + 60_000, k*30_000 + 90_000, k*30_000 + 90_000}
		for i := range want {
			if dues[i] != want[i] {
				t.Fatalf("due_at after each renewal %v, want %v", dues, want)
			}
		}
		// Without the age deadline, and where the rounding would pass it,
		// due_at is the lease end itself.
		b.clock.Advance(lease / 3)
		r, err := b.l.Renew(ctx, task.TaskID, c.AssignmentVersion, lease)
		if err != nil || r.DueAt != r.LeaseUntil {
			t.Fatalf("renewed without the age deadline: due_at %d, lease_until %d, %v; want equal", r.DueAt, r.LeaseUntil, err)
		}
		b.clock.Advance(lease / 3)
		until := b.clock.Now().Add(lease).UnixMilli()
		if r, err = b.l.Renew(ctx, task.TaskID, c.AssignmentVersion, lease, ledger.WithAgeDeadline(until+1)); err != nil || r.DueAt != until {
			t.Fatalf("renewed with the deadline 1 ms after the lease end: due_at %d (lease_until %d), %v; want the lease end, not rounded past the deadline", r.DueAt, until, err)
		}
	})
}

// TestRequeueUnstartedNeedsTheMarkAbsent: the reconciler's re-queue of an
// expired lease without a call start is refused once the assignment
// recorded its call start, and applied while it has not.
func TestRequeueUnstartedNeedsTheMarkAbsent(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		marked := mustCreate(t, b, "requeue-unstarted-marked")
		plain := mustCreate(t, b, "requeue-unstarted-plain")
		cm, err := b.l.Claim(ctx, marked.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := b.l.Claim(ctx, plain.TaskID, ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.MarkCallStarted(ctx, cm.TaskID, cm.AssignmentVersion, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
		if _, err := b.l.RequeueUnstarted(ctx, cm.TaskID, cm.AssignmentVersion); !errors.As(err, new(*ledger.FencedError)) {
			t.Fatalf("RequeueUnstarted of a marked assignment = %v, want *FencedError", err)
		}
		if got := mustGet(t, b, cm.TaskID); got.State != ledger.StateRunning {
			t.Fatalf("marked task %s after the refused re-queue, want running", got.State)
		}
		got, err := b.l.RequeueUnstarted(ctx, cp.TaskID, cp.AssignmentVersion)
		if err != nil || got.State != ledger.StateQueued {
			t.Fatalf("RequeueUnstarted of an unmarked assignment = %v, %v; want queued", got, err)
		}
	})
}
