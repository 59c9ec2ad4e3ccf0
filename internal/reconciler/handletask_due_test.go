package reconciler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// cancelledPastDeadline builds the state both subtests start from, with a
// provider that neither deduplicates nor reads back (the project standard):
// a task claimed, its call started (the call-start mark), its age budget
// over while the call is in flight (the lease, renewed by the heartbeat,
// still live), then cancelled while running (ledger.CancelRunning: unknown
// at version+1, cancel_version = the worker's version, due when the fenced
// lease would have ended — some 20 s from now).
func cancelledPastDeadline(t *testing.T, b *bundle, key string) (claimed, cancelled *ledger.Task) {
	t.Helper()
	task := create(t, b, key, func(n *ledger.NewTask) { n.MaxAge = 10 * time.Second })
	c := claim(t, b, task.TaskID) // lease 30 s
	markCall(t, b, c)
	b.clock.Advance(11 * time.Second) // the age deadline passed during the call; the lease did not
	u, err := b.l.CancelRunning(ctx, c)
	if err != nil {
		t.Fatalf("cancel while running: %v", err)
	}
	if u.State != ledger.StateUnknown || u.CancelVersion != c.AssignmentVersion || u.DueAt <= b.clock.Now().UnixMilli() {
		t.Fatalf("after the cancel: %s, cancel_version %d, due_at %d (now %d); want unknown, due in the future",
			u.State, u.CancelVersion, u.DueAt, b.clock.Now().UnixMilli())
	}
	return c, u
}

// TestHandleTaskLeavesACancelledTaskAloneUntilItIsDue: HandleTask promises
// (handler.go, doc.go) to apply "the rule of its state, which checks that
// the task is due (... an unknown task Settle old ...) and otherwise leaves
// it alone, counted in Raced". A task cancelled while running is "due when
// the fenced lease would have ended (by then the worker has found itself
// fenced)" (ledger.CancelRunning). The scheduled walk honours that (its
// by_state query returns unknown tasks only once due_at is Settle past);
// HandleTask has no such query, so the unknown rule's own due check must
// hold even when the age budget is over — else it parks the task
// unknown_outcome while the fenced worker may still be deciding it (see
// internal/worker/handletask_cancel_window_test.go for the outcome that
// breaks).
func TestHandleTaskLeavesACancelledTaskAloneUntilItIsDue(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		opts := simulated.Options{NoIdempotency: true, NoReadback: true}

		t.Run("walk", func(t *testing.T) {
			b := setup(t, e, opts)
			c, _ := cancelledPastDeadline(t, b, "cancelled-due-walk")
			if s, err := b.handler().Handle(ctx, json.RawMessage(`{}`)); err != nil || s.Parked+s.Cancelled+s.Completed != 0 {
				t.Fatalf("scheduled run: %+v, %v; want the not-yet-due task left alone", s, err)
			}
			if got := get(t, b, c.TaskID); got.State != ledger.StateUnknown {
				t.Fatalf("after a scheduled run: %s; want unknown (not due)", got.State)
			}
		})

		t.Run("HandleTask", func(t *testing.T) {
			b := setup(t, e, opts)
			c, u := cancelledPastDeadline(t, b, "cancelled-due-handletask")
			s, err := b.handler().HandleTask(ctx, c.TaskID)
			got := get(t, b, c.TaskID)
			if err != nil || s.Parked+s.Cancelled+s.Completed != 0 || s.Raced != 1 || got.State != ledger.StateUnknown {
				t.Fatalf("HandleTask %s before the cancelled task was due (due_at is %s ahead; the fenced lease still runs): summary parked %d cancelled %d raced %d, err %v; task now %s (review %q); want it left alone (raced)",
					verb(s), time.Duration(u.DueAt-b.clock.Now().UnixMilli())*time.Millisecond, s.Parked, s.Cancelled, s.Raced, err, got.State, got.ReviewReason)
			}
		})
	})
}

func verb(s reconciler.Summary) string {
	switch {
	case s.Parked > 0:
		return "parked the task"
	case s.Cancelled > 0:
		return "cancelled the task"
	case s.Completed > 0:
		return "completed the task"
	}
	return "acted"
}

// TestDueIsWhenHandleTaskActs: Handler.Due says when a run would act on a
// running task — its rounded due_at and its lease both Grace past — and
// HandleTask leaves the task alone exactly until then.
func TestDueIsWhenHandleTaskActs(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		h := b.handler()
		task := create(t, b, "due-handletask")
		c := claim(t, b, task.TaskID) // lease 30 s
		b.clock.Advance(10 * time.Second)
		r, err := b.l.Renew(ctx, c.TaskID, c.AssignmentVersion, 30*time.Second, ledger.WithAgeDeadline(c.DeadlineMs))
		if err != nil {
			t.Fatal(err)
		}
		if r.DueAt < r.LeaseUntil {
			t.Fatalf("renewed: due_at %d before lease_until %d", r.DueAt, r.LeaseUntil)
		}
		acted := false
		for step := 0; step < 200 && !acted; step++ {
			b.clock.Advance(time.Second)
			due := h.Due(get(t, b, c.TaskID), b.clock.Now())
			s, err := h.HandleTask(ctx, c.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			acted = s.Raced == 0
			if acted != due {
				t.Fatalf("at lease_until%+ds, due_at%+ds: Due %v, HandleTask %+v", (b.clock.Now().UnixMilli()-r.LeaseUntil)/1000, (b.clock.Now().UnixMilli()-r.DueAt)/1000, due, s)
			}
		}
		if !acted {
			t.Fatal("HandleTask never acted on the dead worker's task")
		}
	})
}
