package reconciler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// bigLooker reads back a result of size bytes for every operation.
type bigLooker struct{ size int }

func (p bigLooker) Name() string { return "big" }
func (p bigLooker) Generate(context.Context, contract.Request) (contract.Result, error) {
	panic("the reconciler never generates")
}
func (p bigLooker) Lookup(context.Context, string) (contract.Result, error) {
	return contract.Result{Output: []byte(`{"text":"` + strings.Repeat("r", p.size) + `"}`), Provider: "big", ProviderRef: "rb-ref"}, nil
}

func TestReadbackResultTooLargeIsParked(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := unknownTask(t, b, "rb-big", false)
		b.clock.Advance(time.Minute)
		h := b.handler()
		h.Provider = bigLooker{size: itemsize.MaxItemBytes}
		s := handle(t, h)
		if s.Parked != 1 || s.Completed != 0 || s.ReadbackFound != 1 {
			t.Fatalf("summary %+v, want found and parked", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewResultTooLarge || got.Result != "" {
			t.Fatalf("task %s/%s result %d bytes", got.State, got.ReviewReason, len(got.Result))
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(append([]string{r.Summary}, r.Known...), "\n")
		for _, want := range []string{"readback from big found the result", "rb-ref", "409600", "not saved", "DESIGN §12"} {
			if !strings.Contains(text, want) {
				t.Errorf("review lacks %q:\n%s", want, text)
			}
		}
	})
}

// TestReadbackSaveFailingEveryRunIsParkedAtTheDeadline: an unknown task whose
// CompleteFromReadback fails on every run stays unknown within its budget
// and is parked, with the readback facts, once past it.
func TestReadbackSaveFailingEveryRunIsParkedAtTheDeadline(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := unknownTask(t, b, "rb-unsaved", true)
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == task.TaskID {
				return faultinject.SendFailure
			}
			return ""
		}))
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		faulty, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		h := b.handler()
		h.Ledger = faulty
		b.clock.Advance(time.Minute)
		if s, err := h.Handle(ctx, nil); err == nil || s.Errors != 1 || s.Completed != 0 || s.Parked != 0 {
			t.Fatalf("run within the budget: %+v, %v; want the save error reported and the task left unknown", s, err)
		}
		if got := get(t, b, task.TaskID); got.State != ledger.StateUnknown {
			t.Fatalf("state %s, want unknown", got.State)
		}
		b.clock.Set(time.UnixMilli(task.DeadlineMs).Add(time.Second))
		s := handle(t, h)
		if s.Parked != 1 {
			t.Fatalf("run past the deadline: %+v, want parked", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewResultNotSaved {
			t.Fatalf("task %s/%s, want needs_review/result_not_saved", got.State, got.ReviewReason)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil || !strings.Contains(r.Summary, "readback found its result") || !strings.Contains(strings.Join(r.Known, "\n"), "UpdateItem complete") {
			t.Fatalf("review %+v, %v", r, err)
		}
	})
}

// TestExpiredLastAttemptIsReadBack: a running task whose last attempt's
// lease expired, with a provider that does not honour idempotency keys,
// goes to unknown and is read back: found → completed; credibly not found
// → budget review; no readback → unknown_outcome.
func TestExpiredLastAttemptIsReadBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		opts       simulated.Options
		performed  bool
		wantState  ledger.State
		wantReason string
	}{
		{"found", simulated.Options{NoIdempotency: true}, true, ledger.StateCompleted, ""},
		{"not_found", simulated.Options{NoIdempotency: true}, false, ledger.StateNeedsReview, ledger.ReviewBudgetExhausted},
		{"no_readback", simulated.Options{NoIdempotency: true, NoReadback: true}, true, ledger.StateNeedsReview, ledger.ReviewUnknownOutcome},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, c.opts)
				task := create(t, b, "last-"+c.name, func(n *ledger.NewTask) { n.MaxAttempts = 1 })
				claimed := claim(t, b, task.TaskID)
				markCall(t, b, claimed) // the worker marks the call it starts
				if c.performed {
					if _, err := b.prov.Generate(ctx, contract.Request{OperationID: task.TaskID, Attempt: 1, Kind: task.Kind, Input: []byte(task.Input)}); err != nil {
						t.Fatal(err)
					}
				}
				b.clock.Advance(time.Minute)
				if s := handle(t, b.handler()); s.ExpiredToUnknown != 1 || s.Parked != 0 {
					t.Fatalf("first run %+v, want the expired last attempt moved to unknown, not parked", s)
				}
				// Past the call timeout (2 min): a "not found" is credible.
				b.clock.Advance(3 * time.Minute)
				handle(t, b.handler())
				got := get(t, b, task.TaskID)
				if got.State != c.wantState || got.ReviewReason != c.wantReason {
					t.Fatalf("task %s/%s, want %s/%s", got.State, got.ReviewReason, c.wantState, c.wantReason)
				}
				if n := b.prov.SideEffects(task.TaskID); c.performed && n != 1 {
					t.Fatalf("side effects %d, want 1 (never re-generated)", n)
				}
			})
		})
	}
}
