package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// ConverseStreamer is the part of *bedrockruntime.Client GenerateStream
// uses; a Converser without it streams the whole reply as one delta.
type ConverseStreamer interface {
	ConverseStream(ctx context.Context, in *bedrockruntime.ConverseStreamInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseStreamOutput, error)
}

// GenerateStream performs req with ConverseStream (contract.Streamer): each
// text delta of the event stream goes to onDelta, and the result (text,
// stop reason, usage from the metadata event) is what Generate would
// return for the same reply. The call is steered as Generate's; an event
// stream that fails or ends before its messageStop was generating:
// Uncertain. A stop reason that Generate refuses (content filtered,
// guardrail, malformed output) is refused the same way.
func (p *Provider) GenerateStream(ctx context.Context, req contract.Request, onDelta contract.DeltaFunc) (contract.Result, error) {
	cs, ok := p.client.(ConverseStreamer)
	if !ok {
		res, err := p.Generate(ctx, req)
		if err == nil && onDelta != nil {
			if text, terr := outputText(res); terr == nil && text != "" {
				onDelta(text)
			}
		}
		return res, err
	}
	in, err := p.converseInput(req)
	if err != nil {
		return contract.Result{}, err
	}
	ctx, cancel, wrote := p.callContext(ctx)
	defer cancel()
	out, err := cs.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{
		ModelId: in.ModelId, Messages: in.Messages, System: in.System,
		InferenceConfig: in.InferenceConfig, RequestMetadata: in.RequestMetadata,
	}, func(o *bedrockruntime.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		return contract.Result{}, p.steer(req.OperationID, err, wrote.Load())
	}
	ref, _ := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata)
	es := out.GetStream()
	defer es.Close()
	uncertain := func(err error) (contract.Result, error) {
		return contract.Result{}, retrypolicy.Uncertain(fmt.Errorf("bedrock: operation %s (request id %s): event stream: %w", req.OperationID, ref, err))
	}
	var (
		text    strings.Builder
		stop    types.StopReason
		stopped bool
		usage   *types.TokenUsage
	)
	for ev := range es.Events() {
		switch e := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			if d, ok := e.Value.Delta.(*types.ContentBlockDeltaMemberText); ok && d.Value != "" {
				text.WriteString(d.Value)
				if onDelta != nil {
					onDelta(d.Value)
				}
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stop, stopped = e.Value.StopReason, true
		case *types.ConverseStreamOutputMemberMetadata:
			usage = e.Value.Usage
		}
	}
	if err := es.Err(); err != nil {
		return uncertain(err)
	}
	if err := ctx.Err(); err != nil {
		return uncertain(err)
	}
	if !stopped {
		return uncertain(errors.New("ended before messageStop"))
	}
	// The same reply as one Converse output: result applies Generate's
	// rules to it.
	return p.result(req.OperationID, &bedrockruntime.ConverseOutput{
		Output: &types.ConverseOutputMemberMessage{Value: types.Message{Role: types.ConversationRoleAssistant,
			Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: text.String()}}}},
		StopReason: stop, Usage: usage, ResultMetadata: out.ResultMetadata,
	})
}

func outputText(res contract.Result) (string, error) {
	var o contract.GenerateOutput
	err := json.Unmarshal(res.Output, &o)
	return o.Text, err
}
