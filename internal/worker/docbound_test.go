package worker_test

// Documents in the call's bound (issues 13 × 14): the budget reservation
// and the admission estimate include each document's
// contract.DocumentTokens, and a provider reporting more than the bound is
// logged and counted. On kumo and moto.

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// withDocument places doc in the bundle's payload bucket (as the submit
// handler's Adopt does) and references it from the task as format.
func (b *bundle) withDocument(t *testing.T, doc []byte, format string) func(*ledger.NewTask) {
	t.Helper()
	r, err := b.h.Payloads.PutInput(context.Background(), doc)
	if err != nil {
		t.Fatal(err)
	}
	return func(n *ledger.NewTask) {
		n.Documents = append(n.Documents, ledger.DocumentRef{UploadID: "up-" + format, Format: format, ContentType: "x/" + format,
			Ref: ledger.PayloadRef{Bucket: r.Bucket, Key: r.Key, SHA256: r.SHA256, Size: r.Size}})
	}
}

// TestSpendReservesDocuments: a budgeted task with a 100,000-byte text
// document reserves the document's bytes too. While the call is held in
// the provider, the chain's and the task's budget items show the
// reservation (prompt 28 + 32, document 100,000 + 64, output 50); after
// the call both are settled with the provider's report.
func TestSpendReservesDocuments(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, false)...)
		withBudgets(t, b, e.DDB, nil)
		g := newGate(b.sim)
		b.h.Provider = modelGate{g}
		doc := bytes.Repeat([]byte("0123456789"), 10_000)
		want := int64(28 + contract.InputOverheadTokens + len(doc) + contract.DocumentOverheadTokens + 50)
		task := b.create(t, "doc-budget", budgetedPrompt, budget(want, nil), b.withDocument(t, doc, "txt"))
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		done := handleInBackground(t, b, context.Background(), ev)
		g.waitStarted(t)
		for _, key := range []string{spend.ChainKeyOf(task), spend.TaskKeyOf(task)} {
			if s := spendState(t, b, key); s.ReservedTokens != want {
				t.Errorf("%s reserved %d tokens during the call, want %d (the document's bytes included)", key, s.ReservedTokens, want)
			}
		}
		close(g.release)
		await(t, done)
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
		wantSpent(t, b, spend.ChainKeyOf(task), usedIn, usedOut)
		wantSpent(t, b, spend.TaskKeyOf(task), usedIn, usedOut)

		// A budget one token short of the bound parks the next task
		// budget_exhausted without a call.
		short := b.create(t, "doc-budget-short", budgetedPrompt, budget(want-1, nil), b.withDocument(t, doc, "txt"))
		b.run(t, short.TaskID)
		got := b.get(t, short.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewBudgetExhausted || b.sim.Calls(short.TaskID) != 0 {
			t.Fatalf("state %s reason %q calls %d; want parked budget_exhausted without a call", got.State, got.ReviewReason, b.sim.Calls(short.TaskID))
		}
	})
}

// TestAdmissionEstimateCountsDocuments: the admission estimate is the same
// bound: while a call with a text document and an image is held, the
// window counts prompt + document bytes + the image bound + output; a
// task with a pdf, bounded by the context window, can never fit a
// 150,000-token minute and is parked provider_config without a call.
func TestAdmissionEstimateCountsDocuments(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, false)...)
		a := withAdmission(b, t, admission.Limit{RequestsPerWindow: 10, TokensPerWindow: 150_000})
		g := newGate(b.sim)
		b.h.Provider = g
		ctx := context.Background()
		text := bytes.Repeat([]byte("a"), 20_000)
		task := b.create(t, "adm-docs", budgetedPrompt, b.withDocument(t, text, "txt"), b.withDocument(t, []byte("\x89PNG fake"), "png"))
		want := int64(28+contract.InputOverheadTokens+len(text)+contract.ImageTokens+2*contract.DocumentOverheadTokens) + 50
		if est := b.h.Admission.Estimate(budgetedPrompt, contract.DocumentSize{Format: "txt", Size: int64(len(text))}, contract.DocumentSize{Format: "png", Size: 9}); est != want {
			t.Fatalf("Estimate = %d, want %d", est, want)
		}
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		done := handleInBackground(t, b, ctx, ev)
		g.waitStarted(t)
		w, err := a.Read(ctx, simulated.DefaultModel, b.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if w.Requests != 1 || w.Tokens != want {
			t.Errorf("window %+v during the call, want 1 request and the %d-token estimate (documents included)", w, want)
		}
		close(g.release)
		await(t, done)
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)

		b.h.Provider = b.sim
		pdf := b.create(t, "adm-pdf", budgetedPrompt, b.withDocument(t, []byte("%PDF-1.7 tiny"), "pdf"))
		b.run(t, pdf.TaskID)
		got := b.get(t, pdf.TaskID)
		wantState(t, got, ledger.StateNeedsReview)
		if got.ReviewReason != ledger.ReviewProviderConfig || got.ErrorClass != "admission_config" || b.sim.Calls(pdf.TaskID) != 0 {
			t.Fatalf("reason %q class %q calls %d; want provider_config/admission_config without a call", got.ReviewReason, got.ErrorClass, b.sim.Calls(pdf.TaskID))
		}
	})
}

// overReporter is the simulated provider reporting far more input tokens
// than any bound of the call: what a provider would do if a document
// bound were wrong.
type overReporter struct{ *simulated.Provider }

func (p overReporter) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	res, err := p.Provider.Generate(ctx, req)
	if err == nil {
		res.Usage = &contract.Usage{InputTokens: 1_000_000, OutputTokens: res.Usage.OutputTokens}
	}
	return res, err
}

// TestBoundExceededIsCounted: a call whose reported usage is within its
// bound writes no BoundExceeded metric; one whose provider reports more
// is logged (bound and reported tokens, no task text) and counted, and is
// still settled with the report.
func TestBoundExceededIsCounted(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		withBudgets(t, b, e.DDB, nil)
		within := b.create(t, "bound-ok", budgetedPrompt, budget(10_000, nil))
		b.run(t, within.TaskID)
		wantState(t, b.get(t, within.TaskID), ledger.StateCompleted)
		if strings.Contains(b.metrics.String(), worker.MetricBoundExceeded) {
			t.Fatalf("a call within its bound was counted: %s", b.metrics.String())
		}

		b.h.Provider = overReporter{b.sim}
		over := b.create(t, "bound-over", budgetedPrompt, budget(2_000_000, nil))
		b.run(t, over.TaskID)
		wantState(t, b.get(t, over.TaskID), ledger.StateCompleted)
		if !strings.Contains(b.metrics.String(), `"`+worker.MetricBoundExceeded+`":1`) {
			t.Fatalf("no %s metric in %s", worker.MetricBoundExceeded, b.metrics.String())
		}
		logs := b.logs.String()
		if !strings.Contains(logs, "more tokens than the call's bound") || !strings.Contains(logs, `"input_tokens":1000000`) || !strings.Contains(logs, `"bound_input_tokens":60`) {
			t.Fatalf("the over-report is not logged with the bound and the report:\n%s", logs)
		}
		if strings.Contains(logs, "write one line about ledgers") {
			t.Fatal("the log quotes the task's prompt")
		}
		wantSpent(t, b, spend.TaskKeyOf(over), 1_000_000, usedOut)
	})
}

// TestSpendReservesOffloadedInput: an input kept in the payload bucket
// (over 4 KiB; the item's input is empty) reserves its prompt's bytes, as
// read for the call — not the empty item attribute's.
func TestSpendReservesOffloadedInput(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, false)...)
		withBudgets(t, b, e.DDB, nil)
		g := newGate(b.sim)
		b.h.Provider = modelGate{g}
		input := largeInput(10_000)
		g2, err := contract.ParseGenerateInput([]byte(input))
		if err != nil {
			t.Fatal(err)
		}
		want := int64(len(g2.Prompt)) + contract.InputOverheadTokens + contract.MaxTokensLimit
		v, err := b.h.Payloads.PlaceInput(context.Background(), []byte(input))
		if err != nil || v.Ref == nil {
			t.Fatalf("place input: %+v, %v", v, err)
		}
		task := b.create(t, "offloaded-budget", "", budget(1_000_000, nil), func(n *ledger.NewTask) {
			n.InputRef = &ledger.PayloadRef{Bucket: v.Ref.Bucket, Key: v.Ref.Key, SHA256: v.Ref.SHA256, Size: v.Ref.Size}
		})
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		done := handleInBackground(t, b, context.Background(), ev)
		g.waitStarted(t)
		if s := spendState(t, b, spend.ChainKeyOf(task)); s.ReservedTokens != want {
			t.Errorf("reserved %d tokens for an offloaded input, want %d (its %d prompt bytes + %d + %d)", s.ReservedTokens, want, len(g2.Prompt), contract.InputOverheadTokens, contract.MaxTokensLimit)
		}
		close(g.release)
		await(t, done)
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
	})
}
