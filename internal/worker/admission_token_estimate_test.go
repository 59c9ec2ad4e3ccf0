package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestAttack14AdmissionUnderestimateExceedsWindow (adversarial review of
// issue 14): the admission estimate counts one input token per 4 prompt
// bytes, but a provider may count up to one token per byte or two (the
// simulated provider counts one per word: "a a a ..." is one token per 2
// bytes; real tokenizers do similar for CJK or unusual text). The budget
// already reserves by contract.CallMaximum (bytes + overhead); admission
// does not. Here a model limited to 150 tokens per minute admits a call
// estimated at 110 tokens that the provider counts as 210: the per-minute
// token limit DESIGN §13 promises never to exceed is exceeded by a single
// admitted call. Smallest fix: estimate the input as contract.CallMaximum
// does (prompt + system bytes + InputOverheadTokens), so an admitted call
// can never use more than its reservation.
func TestAttack14AdmissionUnderestimateExceedsWindow(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		const limit = 150
		a := withAdmission(b, t, admission.Limit{RequestsPerWindow: 10, TokensPerWindow: limit})
		words := strings.TrimSpace(strings.Repeat("a ", 200))
		task := b.create(t, "atk14-adm", `{"prompt":"`+words+`","max_tokens":10}`)
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
