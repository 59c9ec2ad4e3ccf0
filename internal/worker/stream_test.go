package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// recordedStream records one attempt's stream, and the task as the ledger
// holds it when the done frame is asked for.
type recordedStream struct {
	mu                 sync.Mutex
	attempt            int
	deltas             []string
	done, closed       bool
	dones              int
	state, sum         string
	stateAtDone        ledger.State
	resultSHA256AtDone string
	read               func() *ledger.Task
}

func (r *recordedStream) Delta(d string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deltas = append(r.deltas, d)
}

func (r *recordedStream) Done(_ context.Context, state, sum string) {
	t := r.read()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dones++
	if r.closed || r.done {
		return // the first done frame is the one a subscriber sees
	}
	r.done, r.state, r.sum = true, state, sum
	r.stateAtDone, r.resultSHA256AtDone = t.State, t.ResultSHA256
}

func (r *recordedStream) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
}

type recordedStreams struct {
	mu      sync.Mutex
	streams []*recordedStream
	read    func(id string) *ledger.Task
}

func (s *recordedStreams) Begin(_ context.Context, taskID string, attempt int) worker.StreamAttempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &recordedStream{attempt: attempt, read: func() *ledger.Task { return s.read(taskID) }}
	s.streams = append(s.streams, r)
	return r
}

// A streamed generation's deltas are its saved text, and the done frame
// is asked for once, after the save, naming the saved state and hash.
func TestStreamedCallEndsWithTheSavedResult(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		rs := &recordedStreams{read: func(id string) *ledger.Task { return b.get(t, id) }}
		b.h.Streams = rs
		task := b.create(t, "streamed", prompt)
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, context.Background(), b.deliver(t, 1, 60)))

		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		if len(rs.streams) != 1 {
			t.Fatalf("%d streams, want 1", len(rs.streams))
		}
		r := rs.streams[0]
		var out contract.GenerateOutput
		if err := json.Unmarshal([]byte(got.Result), &out); err != nil {
			t.Fatal(err)
		}
		if strings.Join(r.deltas, "") != out.Text || len(r.deltas) < 2 {
			t.Fatalf("deltas %q, saved text %q", r.deltas, out.Text)
		}
		if r.dones != 1 {
			t.Fatalf("the done frame was asked for %d times, want once", r.dones)
		}
		if !r.done || r.attempt != 1 || r.state != string(ledger.StateCompleted) || r.sum != got.ResultSHA256 {
			t.Fatalf("stream %+v, want done: completed, %s", r, got.ResultSHA256)
		}
		if r.stateAtDone != ledger.StateCompleted || r.resultSHA256AtDone != got.ResultSHA256 {
			t.Fatalf("at the done frame the ledger held %s / %q: the done frame came before the save", r.stateAtDone, r.resultSHA256AtDone)
		}
	})
}

// An attempt whose reply was streamed but not saved ends without a done
// frame.
func TestStreamedCallNotSavedHasNoDoneFrame(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		rs := &recordedStreams{read: func(id string) *ledger.Task { return b.get(t, id) }}
		b.h.Streams = rs
		task := b.create(t, "streamed-lost", prompt)
		b.sim.Script(task.TaskID, simulated.AcceptLoseReply)
		b.send(t, task.TaskID)
		handle(t, b.h, context.Background(), b.deliver(t, 1, 60))

		if len(rs.streams) != 1 {
			t.Fatalf("%d streams, want 1", len(rs.streams))
		}
		r := rs.streams[0]
		if len(r.deltas) == 0 || r.done || !r.closed {
			t.Fatalf("stream of a lost reply: %d deltas, done %t, closed %t; want deltas, closed, no done frame", len(r.deltas), r.done, r.closed)
		}
		if got := b.get(t, task.TaskID); got.Result != "" {
			t.Fatalf("task %s holds a result", got.State)
		}
	})
}
