package worker_test

// A crashed attempt's reservations on its caller's daily quota (and its
// budgets) when its task never runs again: parked by the reconciler, or
// resolved by an operator (DESIGN §13), on kumo and moto.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// quotaDay is what the caller's quota item for the bundle clock's day
// holds: settled usage, and the reservations of calls in flight.
func quotaDay(t *testing.T, b *bundle, scope string) (settled, reserved int64) {
	t.Helper()
	out, err := b.e.DDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &b.e.Names.TasksTable, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: quotaKey(b, scope)}}})
	if err != nil {
		t.Fatal(err)
	}
	n := func(name string) int64 {
		var v int64
		if a, ok := out.Item[name].(*types.AttributeValueMemberN); ok {
			if err := json.Unmarshal([]byte(a.Value), &v); err != nil {
				t.Fatal(err)
			}
		}
		return v
	}
	settled = n("spent_input_tokens") + n("spent_output_tokens")
	return settled, n("used_tokens") - settled
}

// settlingReconciler is the reconciler over the bundle's tables, at the
// bundle's clock, settling what parked attempts hold through acct (nil:
// as it was before it settled anything).
func settlingReconciler(b *bundle, acct *spend.Accountant) *reconciler.Handler {
	return &reconciler.Handler{
		Ledger:   b.l,
		Dispatch: &dispatch.Sender{SQS: b.e.SQS, QueueURL: b.e.Names.TaskQueueURL},
		Provider: b.sim,
		Log:      logging.Discard(),
		Spend:    acct,
	}
}

// crashAfterBilledCall runs id's attempt through the provider (which
// bills it) and kills the worker before it settles anything: the call's
// reservation stays on the caller's day and the task's budgets.
func crashAfterBilledCall(t *testing.T, b *bundle, id string) {
	t.Helper()
	b.h.Hooks = &worker.Hooks{AfterProvider: func(context.Context, string) error { return errDie }}
	b.send(t, id)
	handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
	b.h.Hooks = nil
	if n := b.sim.Calls(id); n != 1 {
		t.Fatalf("setup: %d provider calls, want 1", n)
	}
}

// parkByReconciler lets the lease lapse and runs rc until id is parked.
func parkByReconciler(t *testing.T, b *bundle, rc *reconciler.Handler, id string) *ledger.Task {
	t.Helper()
	for range 3 {
		b.clock.Advance(time.Minute)
		if _, err := rc.Handle(context.Background(), json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		if got := b.get(t, id); got.State == ledger.StateNeedsReview {
			return got
		}
	}
	got := b.get(t, id)
	t.Fatalf("setup: the reconciler left task %s %s, want it parked", id, got.State)
	return nil
}

// TestParkedAttemptsQuotaHoldIsChargedNotLeftReserved: a budgeted task's
// worker reserves its call (110 tokens) on the caller's 200-token day and
// on its budgets, the provider bills the call, and the worker dies before
// settling. The reconciler parks the task — its last attempt's lease
// expired (budget_exhausted), or its outcome is unknown and cannot be
// read back (unknown_outcome) — so no attempt of it will ever settle that
// reservation: the task's next attempt was the only one that did. Left
// "reserved by calls in flight" all day, it makes every other task of the
// caller that fits only once it is gone wait in 5–10 s cycles until its
// age budget parks it. Settled in full at the park (the provider may have
// billed it), the day's settled usage leaves no room for the next 110-token
// call, which is parked at once, quota_exceeded, instead of waiting for a
// call that will never settle; the budgets show the call as spent.
func TestParkedAttemptsQuotaHoldIsChargedNotLeftReserved(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		sim    simulated.Options
		rc     func(*reconciler.Handler)
		task   func(*ledger.NewTask)
		reason string
	}{
		// A provider that honours idempotency keys and cannot be read back:
		// the expired lease of the last attempt is parked at once.
		{"last attempt's lease expired", simulated.Options{}, func(h *reconciler.Handler) {
			h.Provider, h.SideEffects = nil, func(string) bool { return false }
		}, func(n *ledger.NewTask) { n.MaxAttempts = 1 }, ledger.ReviewBudgetExhausted},
		{"outcome unknown", simulated.Options{NoIdempotency: true, NoReadback: true}, func(*reconciler.Handler) {},
			func(n *ledger.NewTask) { n.MaxAttempts = 1 }, ledger.ReviewUnknownOutcome},
		// Re-queued (the provider honours idempotency keys and cannot be
		// read back), the task's age budget ends before it runs again:
		// parked from queued, its crashed attempt's reservation still held.
		{"age budget after a re-queue", simulated.Options{}, func(h *reconciler.Handler) {
			h.Provider, h.SideEffects = nil, func(string) bool { return false }
		}, func(n *ledger.NewTask) { n.MaxAge = 90 * time.Second }, ledger.ReviewBudgetExhausted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withSim(c.sim))
				s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 200})
				ctx := context.Background()
				task := b.create(t, "abandoned-billed", budgetedPrompt, budget(10_000, nil), c.task)
				crashAfterBilledCall(t, b, task.TaskID)
				if _, reserved := quotaDay(t, b, "anonymous"); reserved != reserveTokens {
					t.Fatalf("setup: the day holds %d tokens reserved after the crash, want %d", reserved, reserveTokens)
				}

				rc := settlingReconciler(b, s.Budgets)
				c.rc(rc)
				parked := parkByReconciler(t, b, rc, task.TaskID)
				if parked.ReviewReason != c.reason {
					t.Fatalf("setup: parked %q, want %q", parked.ReviewReason, c.reason)
				}
				settled, reserved := quotaDay(t, b, "anonymous")
				if reserved != 0 || settled != reserveTokens {
					t.Fatalf("task %s is parked (%s) and will never settle its call, but the caller's day still holds %d tokens as reserved by calls in flight (%d settled); want its %d charged as used",
						task.TaskID, parked.ReviewReason, reserved, settled, reserveTokens)
				}
				// In full, split like the reservation: 60 input, 50 output tokens.
				wantSpent(t, b, spend.ChainKeyOf(task), reserveTokens-50, 50)
				wantSpent(t, b, spend.TaskKeyOf(task), reserveTokens-50, 50)

				// The re-queued task's message is no longer of use: out of the way.
				for len(b.poll(t, 10, 60)) > 0 {
				}
				next := b.create(t, "abandoned-billed-next", budgetedPrompt)
				b.send(t, next.TaskID)
				handle(t, b.h, ctx, b.deliver(t, 1, 60))
				got := b.get(t, next.TaskID)
				if got.State != ledger.StateNeedsReview || got.ErrorClass != "quota_exceeded" {
					t.Fatalf("the caller's next task is %s (%s): with the parked call's %d tokens charged, the day's 200 leave no room for its %d, so it is parked at once — not left waiting for a call that will never settle",
						got.State, got.ErrorClass, reserveTokens, reserveTokens)
				}

				// An operator's resolve settles again: nothing is counted twice.
				resolve := ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops@example.com", Note: "billed, not saved"}
				if _, err := opsapi.Apply(ctx, b.l, nil, s.Budgets, task.TaskID, resolve); err != nil {
					t.Fatalf("operator resolve: %v", err)
				}
				if settled, reserved := quotaDay(t, b, "anonymous"); reserved != 0 || settled != reserveTokens {
					t.Fatalf("after the operator's resolve the day holds %d settled, %d reserved; want %d settled once", settled, reserved, reserveTokens)
				}
				wantSpent(t, b, spend.ChainKeyOf(task), reserveTokens-50, 50)
			})
		})
	}
}

// markCrash is the worker's ledger store whose call-start mark kills the
// worker: it has reserved the call, and dies before the mark — so before
// any call.
type markCrash struct{ ledger.DynamoDB }

func (m markCrash) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	for _, name := range in.ExpressionAttributeNames {
		if name == "call_started_version" {
			panic("simulated crash before the call-start mark")
		}
	}
	return m.DynamoDB.UpdateItem(ctx, in, opts...)
}

// TestParkedUnstartedAttemptsQuotaHoldIsGivenBack: the provider takes no
// idempotency keys, so the worker marks every call's start; this worker
// reserves its call's 110 tokens on the caller's 150-token day and dies
// before the mark. The reconciler parks the task (its last attempt's lease
// expired, no call started under it: the mark proves it). Nothing was
// billed, so the reservation is given back at the park; left counted, the
// caller's next task — whose 110 tokens fit the day's 150 — would wait in
// cycles for it until its age budget parked it. It runs.
func TestParkedUnstartedAttemptsQuotaHoldIsGivenBack(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 150})
		ctx := context.Background()
		task := b.create(t, "abandoned-unstarted", budgetedPrompt, func(n *ledger.NewTask) { n.MaxAttempts = 1 })

		l, err := ledger.New(markCrash{e.DDB}, b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		b.h.Ledger = l
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		b.h.Ledger = b.l
		if n := b.sim.Calls(task.TaskID); n != 0 {
			t.Fatalf("setup: %d provider calls, want none", n)
		}
		if _, reserved := quotaDay(t, b, "anonymous"); reserved != reserveTokens {
			t.Fatalf("setup: the day holds %d tokens reserved after the crash, want %d", reserved, reserveTokens)
		}

		parked := parkByReconciler(t, b, settlingReconciler(b, s.Budgets), task.TaskID)
		if parked.ReviewReason != ledger.ReviewBudgetExhausted {
			t.Fatalf("setup: parked %q, want budget_exhausted", parked.ReviewReason)
		}
		if settled, reserved := quotaDay(t, b, "anonymous"); settled != 0 || reserved != 0 {
			t.Fatalf("task %s is parked, no call started under its attempt, yet the caller's day holds %d tokens reserved and %d settled for it; want nothing",
				task.TaskID, reserved, settled)
		}

		next := b.create(t, "abandoned-unstarted-next", budgetedPrompt)
		b.send(t, next.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if got := b.get(t, next.TaskID); got.State != ledger.StateCompleted {
			t.Fatalf("the caller's next task is %s (%s), want completed: its %d tokens fit the day's 150 once the parked task's reservation — no call was made — is given back",
				got.State, got.ErrorClass, reserveTokens)
		}
	})
}

// TestOperatorResolveSettlesAParkedAttemptsQuotaHold: a task parked while
// its crashed attempt still held its reservation (parked by a reconciler
// that settled nothing — before this rule, or its settle failed) is
// resolved by an operator: the resolve settles the reservation in full,
// on the caller's day and on the budgets, and the task's next run's ids
// (a retry) never meet it.
func TestOperatorResolveSettlesAParkedAttemptsQuotaHold(t *testing.T) {
	t.Parallel()
	for _, resolution := range []string{ledger.ResolutionFailed, ledger.ResolutionRetry} {
		t.Run(resolution, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
				s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 1000})
				ctx := context.Background()
				task := b.create(t, "abandoned-operator", budgetedPrompt, budget(10_000, nil))
				crashAfterBilledCall(t, b, task.TaskID)
				parkByReconciler(t, b, settlingReconciler(b, nil), task.TaskID)
				if _, reserved := quotaDay(t, b, "anonymous"); reserved != reserveTokens {
					t.Fatalf("setup: the day holds %d tokens reserved after the park, want %d", reserved, reserveTokens)
				}

				act := ledger.OperatorAction{Resolution: resolution, By: "ops@example.com", Note: "checked"}
				if _, err := opsapi.Apply(ctx, b.l, nil, s.Budgets, task.TaskID, act); err != nil {
					t.Fatalf("operator %s: %v", resolution, err)
				}
				settled, reserved := quotaDay(t, b, "anonymous")
				if reserved != 0 || settled != reserveTokens {
					t.Fatalf("after the operator's %s of the parked task, the caller's day holds %d tokens reserved, %d settled; want its crashed call's %d charged as used",
						resolution, reserved, settled, reserveTokens)
				}
				wantSpent(t, b, spend.ChainKeyOf(task), reserveTokens-50, 50)
				wantSpent(t, b, spend.TaskKeyOf(task), reserveTokens-50, 50)
			})
		})
	}
}

// TestQuotaWaitGrowsWithTheTimeATaskHasWaited: a call kept out of its
// caller's day only by a reservation of a call in flight waits (its
// attempt given back). A reservation that never settles (a crashed call
// nobody settles: a worker of another deployment, a park whose settle
// failed) keeps it out until its age budget ends; at 5–10 s a wait, that
// was up to 720 claims an hour for one task. The first wait stays short
// (a call in flight settles in seconds), and the wait grows with the time
// the task has been kept: a task waiting for two minutes waits 30–60 s.
func TestQuotaWaitGrowsWithTheTimeATaskHasWaited(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 100})
		ctx := context.Background()
		// A call in flight that never settles holds 60 of the 100 tokens.
		if _, err := s.Quotas.Reserve(ctx, "anonymous", spend.Reservation{ID: "t_stuck.a1", Tokens: 60}); err != nil {
			t.Fatal(err)
		}
		task := b.create(t, "quota-wait-grows", burstPrompt) // 45 tokens: fits the settled 0, not the 60 held
		wait := func() time.Duration {
			t.Helper()
			b.send(t, task.TaskID)
			handle(t, b.h, ctx, b.deliver(t, 1, 60))
			got := b.get(t, task.TaskID)
			if got.State != ledger.StateRetryWait || got.Attempts != 0 {
				t.Fatalf("setup: task %s with %d attempts, want retry_wait with its attempt given back", got.State, got.Attempts)
			}
			return time.UnixMilli(got.NotBefore).Sub(b.clock.Now())
		}
		if d := wait(); d < worker.QuotaWait || d >= 2*worker.QuotaWait {
			t.Fatalf("the first wait is %v, want %v to %v", d, worker.QuotaWait, 2*worker.QuotaWait)
		}
		b.clock.Advance(2 * time.Minute)
		if d := wait(); d < 30*time.Second || d > time.Minute {
			t.Fatalf("a task kept out for two minutes by a reservation that has not settled waits %v again, want 30 s to 1 min: at a fixed 5–10 s a hold that never clears costs up to %d claims an hour",
				d, int(time.Hour/worker.QuotaWait))
		}
		if strings.Contains(b.logs.String(), `"level":"ERROR"`) {
			t.Fatalf("errors logged:\n%s", b.logs.String())
		}
	})
}

// TestReadbackCompletionChargesTheCrashedAttemptsQuotaHold: as above, but
// the provider can be read back: when the re-queued task's age budget
// ends, the readback finds the crashed attempt's result and completes the
// task. That ends the run too, so the hold no attempt will settle is
// charged in full (the call generated), not left reserved all day.
func TestReadbackCompletionChargesTheCrashedAttemptsQuotaHold(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{}))
		s := withBudgets(t, b, e.DDB, &spend.Quota{Unit: spend.UnitTokens, Limit: 200})
		task := b.create(t, "abandoned-read-back", budgetedPrompt, budget(10_000, nil), func(n *ledger.NewTask) { n.MaxAge = 90 * time.Second })
		crashAfterBilledCall(t, b, task.TaskID)
		rc := settlingReconciler(b, s.Budgets)
		for range 3 {
			b.clock.Advance(time.Minute)
			if _, err := rc.Handle(context.Background(), json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		if got := b.get(t, task.TaskID); got.State != ledger.StateCompleted || got.ReadbackAt == "" {
			t.Fatalf("setup: task %s (readback_at %q); want completed from the readback", got.State, got.ReadbackAt)
		}
		if settled, reserved := quotaDay(t, b, "anonymous"); reserved != 0 || settled != reserveTokens {
			t.Fatalf("completed from the readback, the caller's day holds %d tokens reserved (%d settled); want its %d charged as used",
				reserved, settled, reserveTokens)
		}
		wantSpent(t, b, spend.TaskKeyOf(task), reserveTokens-50, 50)
	})
}
