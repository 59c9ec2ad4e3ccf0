package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/taskledger/taskledger/internal/provider/bedrock"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

const filterModel = "anthropic.claude-filter-test"

// filteredConverser is Bedrock's runtime answering a Converse the model
// ran in full — it read the 60-token prompt and generated up to the
// request's 50-token max, and Bedrock billed both (usage in the reply) —
// whose output a content filter then withheld: HTTP 200, stop reason
// content_filtered (or guardrail_intervened on the output).
type filteredConverser struct {
	stop   types.StopReason
	calls  atomic.Int64
	billed atomic.Int64 // tokens Bedrock billed, as its replies report them
}

func (c *filteredConverser) Converse(ctx context.Context, in *bedrockruntime.ConverseInput, _ ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error) {
	c.calls.Add(1)
	c.billed.Add(60 + 50)
	return &bedrockruntime.ConverseOutput{
		StopReason: c.stop,
		Output:     &types.ConverseOutputMemberMessage{Value: types.Message{Role: types.ConversationRoleAssistant, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: ""}}}},
		Usage:      &types.TokenUsage{InputTokens: aws.Int32(60), OutputTokens: aws.Int32(50), TotalTokens: aws.Int32(110)},
	}, nil
}

// TestContentFilteredCallsAreChargedTheirUsage: the worker charges a
// failed call nothing when retrypolicy.Refused says it was "turned away in
// so many words". Refused's own rule: "the status the response carried
// decides …; without a response, a class an adapter steered to
// PermanentInput or PermanentConfig (a request refused before it was sent
// …) is a refusal". The real Bedrock adapter steers a Converse that
// answered HTTP 200 with stop reason content_filtered /
// guardrail_intervened to retrypolicy.Permanent — no status in the chain
// (the call succeeded at the HTTP level) — although the model ran and
// Bedrock billed the tokens its reply reports; so the error must say the
// call acted, or Refused would take it for a refusal and usedBy would
// charge zero.
//
// At stake (DESIGN §13, §1.5, §1.6): a chain budget of 150 tokens — room
// for one call of 110 — must not admit every regenerate of a prompt the
// filter keeps stopping, each charged 0 while the provider bills 110 per
// call: the budget's bound (spent ≤ budget + at most one reservation in
// flight) holds, and the budget item records what was spent. (OpenAI's
// finish_reason content_filter takes the same path.)
func TestContentFilteredCallsAreChargedTheirUsage(t *testing.T) {
	t.Parallel()
	for _, stop := range []types.StopReason{types.StopReasonContentFiltered, types.StopReasonGuardrailIntervened} {
		t.Run(string(stop), func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				conv := &filteredConverser{stop: stop}
				p, err := bedrock.New(conv, bedrock.Options{Model: filterModel})
				if err != nil {
					t.Fatal(err)
				}
				b.h.Provider = p
				withPrices(t, b, e.DDB, nil, spendDocFor(filterModel))

				// What the adapter returns, and what Refused makes of it.
				_, gerr := p.Generate(context.Background(), contract.Request{OperationID: "probe", Input: json.RawMessage(budgetedPrompt)})
				if gerr == nil {
					t.Fatal("setup: a content-filtered Converse returned no error")
				}
				conv.calls.Store(0)
				conv.billed.Store(0)
				refused := retrypolicy.Refused(gerr)

				const limit, reservation = 150, 110
				root := b.create(t, "filter-root-"+string(stop), budgetedPrompt, budget(limit, nil))
				b.run(t, root.TaskID)
				for i := 1; i <= 4; i++ {
					regen := b.create(t, fmt.Sprintf("filter-regen-%d-%s", i, stop), budgetedPrompt, budget(limit, root))
					b.run(t, regen.TaskID)
					if got := b.get(t, regen.TaskID); got.State == ledger.StateNeedsReview {
						break // the budget stopped the chain
					}
				}
				s := spendState(t, b, spend.ChainKeyOf(root))
				billed := conv.billed.Load()
				if billed > limit+reservation || s.Spent.Tokens() < billed {
					t.Fatalf("Bedrock ran the model for %d calls of the chain (HTTP 200, stop reason %s, usage 60+50 tokens each: %d tokens billed); "+
						"the chain's budget of %d tokens records %d tokens spent (Refused(err)=%v for %q). "+
						"Spend exceeds the budget by more than one reservation (%d), and the budget says it did not happen — want every call that ran charged its usage (DESIGN §13, §1.6)",
						conv.calls.Load(), stop, billed, limit, s.Spent.Tokens(), refused, gerr, reservation)
				}
			})
		})
	}
}
