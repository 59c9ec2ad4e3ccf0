package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/taskledger/taskledger/internal/provider/bedrock"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// malformedConverser is Bedrock's runtime answering a Converse that the
// model did run — it generated (and billed) 1 200 tokens — with stop
// reason malformed_model_output.
type malformedConverser struct{ calls atomic.Int32 }

func (c *malformedConverser) Converse(ctx context.Context, in *bedrockruntime.ConverseInput, _ ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error) {
	c.calls.Add(1)
	return &bedrockruntime.ConverseOutput{
		StopReason: types.StopReasonMalformedModelOutput,
		Output:     &types.ConverseOutputMemberMessage{Value: types.Message{Role: types.ConversationRoleAssistant, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "{not json"}}}},
		Usage:      &types.TokenUsage{InputTokens: aws.Int32(200), OutputTokens: aws.Int32(1000), TotalTokens: aws.Int32(1200)},
	}, nil
}

// TestBedrockMalformedOutputThenCancelIsNotCalledARefusal (the real Bedrock
// adapter): the adapter steers a Converse whose model ran and produced
// malformed output Retryable (class Transient) — the model acted and
// billed, its usage is in the reply. A cancel while running lands after
// that reply and before the worker's ScheduleRetry. The worker must not
// end the task cancelled saying "the provider refused the call
// (transient), so it did not act" — false, DESIGN §1.6, and short of the
// cancel contract (ledger.CancelRunning: "ends cancelled once it is known
// that the provider did not act"). The reconciler's cancel rule parks it
// unknown_outcome (Bedrock has no readback): "whether bedrock performed
// (and billed) the generation" — the truth.
func TestBedrockMalformedOutputThenCancelIsNotCalledARefusal(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		conv := &malformedConverser{}
		p, err := bedrock.New(conv, bedrock.Options{Model: "anthropic.claude-test"})
		if err != nil {
			t.Fatal(err)
		}
		b.h.Provider = p
		task := b.create(t, "bedrock-malformed", prompt)
		raced := raceTheSave(t, b, task.TaskID, "cancel")
		var class retrypolicy.Class
		// What the adapter's error is classified as (the worker's classifier).
		if _, gerr := p.Generate(ctx, contract.Request{OperationID: task.OperationID(), Kind: task.Kind, Input: json.RawMessage(task.Input)}); gerr != nil {
			class = retrypolicy.DefaultClassifier(gerr).Class
		}
		conv.calls.Store(0)
		if class != retrypolicy.Transient {
			t.Fatalf("setup: malformed_model_output classified %s, want transient", class)
		}
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 120))
		raced()
		if n := conv.calls.Load(); n != 1 {
			t.Fatalf("setup: %d Converse calls, want 1", n)
		}
		// The reconciler reads back through the same (Bedrock) provider.
		got := b.get(t, task.TaskID)
		for i := 0; i < 5 && got.State.Live(); i++ {
			b.clock.Advance(time.Minute)
			b.reconcile(t, p)
			got = b.get(t, task.TaskID)
		}
		if got.State == ledger.StateCancelled && strings.Contains(got.ErrorMessage, "did not act") {
			t.Fatalf("Bedrock ran the model (1 200 tokens billed, malformed output) and the task ended cancelled saying %q; want it parked unknown_outcome (the provider may have acted), as the reconciler's cancel rule does", got.ErrorMessage)
		}
	})
}
