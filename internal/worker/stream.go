package worker

import (
	"context"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Streams starts the delta stream of one attempt (*stream.Fanout through
// StreamsFunc).
type Streams interface {
	Begin(ctx context.Context, taskID string, attempt int) StreamAttempt
}

// StreamAttempt is one attempt's stream: Delta is the provider call's
// delta sink; Done ends it after the result was saved (the task as saved:
// its state and result_sha256); Close ends it without a done frame. Done
// and Close may both be called; the first wins.
type StreamAttempt interface {
	Delta(string)
	Done(ctx context.Context, state, resultSHA256 string)
	Close()
}

// StreamsFunc adapts a function to Streams.
type StreamsFunc func(ctx context.Context, taskID string, attempt int) StreamAttempt

// Begin calls f.
func (f StreamsFunc) Begin(ctx context.Context, taskID string, attempt int) StreamAttempt {
	return f(ctx, taskID, attempt)
}

// beginStream starts a stream, and returns its delta sink, for a generate
// call to a provider that streams; nil otherwise (a plain Generate).
func (h *Handler) beginStream(ctx context.Context, t *ledger.Task, p provider.Provider) (StreamAttempt, provider.DeltaFunc) {
	if _, ok := p.(provider.Streamer); !ok || h.Streams == nil || t.Kind == deliver.Kind {
		return nil, nil
	}
	if st := h.Streams.Begin(ctx, t.TaskID, t.Attempts); st != nil { // nil: this task is not streamed
		return st, st.Delta
	}
	return nil, nil
}

// endStream sends the done frame of a saved result: the state and hash the
// completion saved (as it wrote them when a lost reply's save was recognised).
func endStream(ctx context.Context, st StreamAttempt, saved *ledger.Task, c ledger.Completion) {
	if st == nil {
		return
	}
	state, sum := ledger.StateCompleted, ledger.SHA256Hex(c.Result)
	if c.ApprovalTTL > 0 {
		state = ledger.StateAwaitingApproval
	}
	if c.ResultRef != nil {
		sum = c.ResultRef.SHA256
	}
	if saved != nil && saved.ResultSHA256 != "" {
		state, sum = saved.State, saved.ResultSHA256
	}
	st.Done(ctx, string(state), sum)
}

func closeStream(st StreamAttempt) {
	if st != nil {
		st.Close()
	}
}
