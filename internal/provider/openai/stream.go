package openai

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// chatChunk is one server-sent event of a streamed chat completion.
type chatChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// errStreamCut is a 2xx stream that ended before it was complete.
var errStreamCut = errors.New("stream ended before finish_reason and [DONE]")

// readStream reads a 2xx text/event-stream body: "data:" lines (joined per
// event, events ended by a blank line), comments and other fields ignored,
// "data: [DONE]" the end. Choice 0's content deltas go to onDelta; the
// result is their concatenation. At most MaxResponseBytes are read.
func (p *Provider) readStream(opID, ref string, body io.Reader, onDelta contract.DeltaFunc) (contract.Result, error) {
	uncertain := func(err error) (contract.Result, error) {
		return contract.Result{}, retrypolicy.Uncertain(fmt.Errorf("openai: operation %s (request id %s): streamed response: %w", opID, ref, err))
	}
	r := bufio.NewReaderSize(io.LimitReader(body, MaxResponseBytes+1), 64<<10)
	var (
		text        strings.Builder
		data        []string
		finish      string
		model, id   string
		usage       contract.Usage
		done, total = false, 0
	)
	dispatch := func() error {
		if len(data) == 0 {
			return nil
		}
		ev := strings.Join(data, "\n")
		data = data[:0]
		if ev == "[DONE]" {
			done = true
			return nil
		}
		var c chatChunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			return fmt.Errorf("unreadable event (%d bytes)", len(ev))
		}
		if c.Error != nil {
			// The server was generating when it gave up: never the
			// message, which may quote the output.
			return fmt.Errorf("error event (type %q)", c.Error.Type)
		}
		if c.ID != "" {
			id = c.ID
		}
		if c.Model != "" {
			model = c.Model
		}
		if c.Usage != nil {
			usage = contract.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				continue
			}
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				text.WriteString(*ch.Delta.Content)
				onDelta(*ch.Delta.Content)
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				finish = *ch.FinishReason
			}
		}
		return nil
	}
	for !done {
		line, err := r.ReadString('\n')
		total += len(line)
		if total > MaxResponseBytes {
			return uncertain(fmt.Errorf("response body over %d bytes", MaxResponseBytes))
		}
		trimmed := strings.TrimRight(line, "\r\n")
		switch {
		case trimmed == "":
			if derr := dispatch(); derr != nil {
				return uncertain(derr)
			}
		case strings.HasPrefix(trimmed, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(trimmed, "data:"), " "))
		}
		if err != nil {
			if derr := dispatch(); derr != nil { // an event not followed by a blank line
				return uncertain(derr)
			}
			if done {
				break
			}
			if errors.Is(err, io.EOF) {
				err = errStreamCut
			}
			return uncertain(err)
		}
	}
	if finish == "" {
		return uncertain(errStreamCut)
	}
	if finish == "content_filter" {
		return contract.Result{}, retrypolicy.Permanent(fmt.Errorf("openai: operation %s: generation stopped by the content filter (finish_reason content_filter): %w", opID, retrypolicy.ErrActed))
	}
	if model == "" {
		model = p.model
	}
	out, err := contract.GenerateOutput{Text: text.String(), Model: model, StopReason: finish, Usage: usage}.Marshal()
	if err != nil {
		return uncertain(err)
	}
	if id != "" {
		ref = id
	}
	res := contract.Result{Output: out, Provider: Name, ProviderRef: ref}
	if usage != (contract.Usage{}) {
		res.Usage = &usage
	}
	return res, nil
}
