package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestAdmittedCallStaysWithinTheTokenLimit: a provider may count up to one
// input token per byte or two (the simulated provider counts one per word:
// "a a a ..." is one token per 2 bytes; real tokenizers do similar for CJK
// or unusual text), so admission estimates a call's input as
// contract.CallMaximum does (prompt + system bytes + InputOverheadTokens),
// like the budget's reservation, and never as one token per 4 bytes. Here
// a model is limited to 150 tokens per minute and a call a 4-bytes-per-token
// estimate would put at 110 tokens uses 210: the per-minute token limit
// DESIGN §13 promises never to exceed must hold for a single admitted call.
func TestAdmittedCallStaysWithinTheTokenLimit(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		const limit = 150
		a := withAdmission(b, t, admission.Limit{RequestsPerWindow: 10, TokensPerWindow: limit})
		words := strings.TrimSpace(strings.Repeat("a ", 200))
		task := b.create(t, "adm", `{"prompt":"`+words+`","max_tokens":10}`)
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		calls := b.sim.Calls(task.TaskID)
		w, err := a.Read(ctx, simulated.DefaultModel, b.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if calls > 0 && w.Tokens > limit {
			t.Fatalf("admitted a call (estimate %d) that used %d tokens in a window limited to %d per minute: the provider's limit was exceeded",
				b.h.Admission.Estimate(task.Input), w.Tokens, limit)
		}
	})
}
