package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// withAdmission gives the bundle's worker an Admitter on the tasks table,
// on the bundle's clock, with lim for the simulated provider's model.
func withAdmission(b *bundle, t *testing.T, lim admission.Limit) *admission.Admitter {
	t.Helper()
	return withAdmissionOn(b, t, b.e.DDB, lim)
}

// withAdmissionOn is withAdmission through db (a client with faults).
func withAdmissionOn(b *bundle, t *testing.T, db admission.DB, lim admission.Limit) *admission.Admitter {
	t.Helper()
	a, err := admission.New(admission.Config{
		DB: db, TasksTable: b.e.Names.TasksTable, Now: b.clock.Now,
		Limits: map[string]admission.Limit{simulated.DefaultModel: lim},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.h.Admission = &worker.Admission{Admitter: a, Model: simulated.DefaultModel}
	return a
}

// TestAdmissionWaitWithoutAnAttempt: a model limited to one request per
// minute; the second task's call is not admitted. It goes back to
// retry_wait with its attempt given back and its message hidden until it
// may fit (not hot-looped), the provider untouched, until the first call
// has left the last minute (its 5 s slot at :30..:35, so at :95); then it
// completes on its first attempt.
func TestAdmissionWaitWithoutAnAttempt(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		// Mid-window: the first call lands in the slot :30..:35.
		start := time.Unix(b.clock.Now().Unix()/60*60, 0)
		b.clock.Set(start.Add(30 * time.Second))
		open := start.Add(95 * time.Second)
		withAdmission(b, t, admission.Limit{RequestsPerWindow: 1, TokensPerWindow: 100_000})
		ctx := context.Background()
		first := b.create(t, "adm-first", prompt)
		second := b.create(t, "adm-second", prompt)

		b.send(t, first.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		wantState(t, b.get(t, first.TaskID), ledger.StateCompleted)

		b.send(t, second.TaskID)
		ev := b.deliver(t, 1, 60)
		wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
		got := b.get(t, second.TaskID)
		// moto returns the window's counts with the refusal, so the wait
		// is exact (:95); kumo returns none, so the worker waits for the
		// next window (:60) and is told :95 there, without a write.
		retryAt := open
		if e.Backend == "kumo" {
			retryAt = start.Add(time.Minute)
		}
		if got.State != ledger.StateRetryWait || got.Attempts != 0 || got.NotBefore != retryAt.UnixMilli() || got.DueAt != retryAt.UnixMilli() {
			t.Fatalf("not admitted: state %s attempts %d not_before %d due_at %d; want retry_wait, 0 attempts, both at %d",
				got.State, got.Attempts, got.NotBefore, got.DueAt, retryAt.UnixMilli())
		}
		if got.ErrorClass != "" {
			t.Fatalf("waiting for admission recorded error class %q; waiting is not a failure", got.ErrorClass)
		}
		if n := b.sim.Calls(second.TaskID); n != 0 {
			t.Fatalf("provider calls %d for the task not admitted, want 0", n)
		}
		var hid int32
		for _, c := range b.sqs.Calls() {
			if c.receipt == ev.Records[0].ReceiptHandle {
				hid = c.secs
			}
		}
		if want := int32(retryAt.Sub(b.clock.Now()) / time.Second); hid != want {
			t.Fatalf("message visibility set to %ds, want %ds (until it may fit)", hid, want)
		}
		if !strings.Contains(b.logs.String(), "not admitted") {
			t.Fatal("no log line says the call was not admitted")
		}

		// A copy delivered before then cannot claim it.
		b.send(t, second.TaskID)
		early := b.deliver(t, 1, 60)
		wantFailures(t, handle(t, b.h, ctx, early), early.Records[0].MessageId)
		if got := b.get(t, second.TaskID); got.State != ledger.StateRetryWait || got.Attempts != 0 || b.sim.Calls(second.TaskID) != 0 {
			t.Fatalf("an early copy: state %s attempts %d provider calls %d; want it left waiting untouched",
				got.State, got.Attempts, b.sim.Calls(second.TaskID))
		}
		if retryAt.Before(open) { // kumo: at the next window, told to wait for :95
			b.clock.Set(retryAt)
			b.send(t, second.TaskID)
			ev := b.deliver(t, 1, 60)
			wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
			if got := b.get(t, second.TaskID); got.State != ledger.StateRetryWait || got.Attempts != 0 || got.NotBefore != open.UnixMilli() || b.sim.Calls(second.TaskID) != 0 {
				t.Fatalf("at the next window: state %s attempts %d not_before %d provider calls %d; want still waiting, 0 attempts, until %d",
					got.State, got.Attempts, got.NotBefore, b.sim.Calls(second.TaskID), open.UnixMilli())
			}
		}
		b.clock.Set(open)
		b.send(t, second.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		done := b.get(t, second.TaskID)
		wantState(t, done, ledger.StateCompleted)
		if done.Attempts != 1 || b.sim.Calls(second.TaskID) != 1 {
			t.Fatalf("completed after the wait with %d attempts and %d provider calls, want 1 and 1", done.Attempts, b.sim.Calls(second.TaskID))
		}
	})
}

// TestAdmissionCostAndSettle: with admission, a completed call costs one
// more UpdateItem (Admit) plus one when the provider's usage differs from
// the estimate (Settle), and the window then holds the reported usage;
// without admission configured there is no admission call at all (the
// floor stays claim + complete).
func TestAdmissionCostAndSettle(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()

		plain := b.create(t, "adm-off", prompt)
		b.send(t, plain.TaskID)
		ev := b.deliver(t, 1, 60)
		e.Counter.Reset()
		wantNoFailures(t, handle(t, b.h, ctx, ev))
		if calls := e.Counter.Calls(); calls["DynamoDB.UpdateItem"] != 2 || calls["DynamoDB.GetItem"] != 0 {
			t.Fatalf("without admission: %v; want 2 UpdateItems (claim, complete) and no GetItem", calls)
		}

		a := withAdmission(b, t, admission.Limit{RequestsPerWindow: 10, TokensPerWindow: 100_000})
		task := b.create(t, "adm-on", `{"prompt":"write one line about ledgers","max_tokens":300}`)
		b.send(t, task.TaskID)
		ev = b.deliver(t, 1, 60)
		e.Counter.Reset()
		wantNoFailures(t, handle(t, b.h, ctx, ev))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		var out contract.GenerateOutput
		if err := json.Unmarshal([]byte(got.Result), &out); err != nil {
			t.Fatal(err)
		}
		used := int64(out.Usage.InputTokens + out.Usage.OutputTokens)
		est := b.h.Admission.Estimate(got.Input)
		if est != int64(len("write one line about ledgers"))+contract.InputOverheadTokens+300 {
			t.Fatalf("estimate %d, want contract.CallMaximum: prompt bytes + overhead + max_tokens 300", est)
		}
		want := 4 // claim, the seal of the previous window (once per worker instance and minute), admit, complete
		if used != est {
			want = 5 // and settle
		}
		if n := e.Counter.Calls()["DynamoDB.UpdateItem"]; n != want {
			t.Fatalf("with admission: %d UpdateItems, want %d (claim, seal, admit, complete, settle when usage %d != estimate %d)", n, want, used, est)
		}
		w, err := a.Read(ctx, simulated.DefaultModel, b.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if w.Requests != 1 || w.Tokens != used {
			t.Fatalf("window %+v after one settled call, want 1 request and the %d tokens the provider reported", w, used)
		}
	})
}

// TestAdmissionNeverPossibleParks: a call whose estimate exceeds the
// model's per-minute token limit can never be admitted: the task is parked
// provider_config with a review naming the limit, and the provider is not
// called.
func TestAdmissionNeverPossibleParks(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		withAdmission(b, t, admission.Limit{RequestsPerWindow: 10, TokensPerWindow: 100})
		ctx := context.Background()
		task := b.create(t, "adm-too-large", `{"prompt":"write one line about ledgers","max_tokens":500}`)
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateNeedsReview)
		if b.sim.Calls(task.TaskID) != 0 {
			t.Fatal("the provider was called for a call admission refused")
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Reason != ledger.ReviewProviderConfig || r.ErrorClass != "admission_config" ||
			!strings.Contains(r.ErrorMessage, "exceeds the per-window limit of 100") || !strings.Contains(r.Summary, "PROVIDER_ADMISSION") {
			t.Fatalf("review %s/%s %q %q; want provider_config/admission_config naming the limit and the setting", r.Reason, r.ErrorClass, r.ErrorMessage, r.Summary)
		}
		if strings.Contains(strings.Join(r.Known, " "), "ledgers") {
			t.Fatal("the review quotes the task's prompt")
		}
	})
}

// TestAdmissionGivenBackWithoutACall: a call admitted and then not made
// (its budget cannot cover it: parked budget_exhausted) gives its
// admission back, so the model's window does not count a call the
// provider never saw.
func TestAdmissionGivenBackWithoutACall(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		withBudgets(t, b, e.DDB, nil)
		a := withAdmission(b, t, admission.Limit{RequestsPerWindow: 10, TokensPerWindow: 1_000_000})
		task := b.create(t, "adm-no-call", budgetedPrompt, budget(5, nil))
		b.send(t, task.TaskID)
		handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
		got := b.get(t, task.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted || b.sim.Calls(task.TaskID) != 0 {
			t.Fatalf("setup: %s/%s with %d provider calls; want parked budget_exhausted without a call", got.State, got.ReviewReason, b.sim.Calls(task.TaskID))
		}
		w, err := a.Read(context.Background(), simulated.DefaultModel, b.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if w.Requests != 0 || w.Tokens != 0 {
			t.Fatalf("window %+v after an admitted call that was never made; want it given back", w)
		}
	})
}
