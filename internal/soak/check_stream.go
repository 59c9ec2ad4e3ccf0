package soak

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The invariants of streamed tasks (stream.go), on every frame
// each connection of a stream kind's task received:
//
//   - stream_done_not_saved: a done frame names the saved result — the
//     task is completed (or awaiting approval) with that result_sha256, and
//     the frame's attempt is the one that saved it (no done frame for a
//     result that was not saved, nor for an attempt that saved nothing);
//   - stream_done_twice: at most one done frame per connection;
//   - stream_delta_after_done: no delta of attempt n after the done frame
//     of attempt n;
//   - stream_seq_broken: the frames of one attempt to one connection are
//     numbered 1, 2, 3, … in the order they arrive (none skipped, none
//     twice);
//   - stream_text_not_result: the deltas of the attempt a done frame ends,
//     concatenated, are the saved result's text;
//   - stream_frame_unreadable, stream_attempt_unknown: every frame is JSON
//     naming an attempt the task had.
func (c *checker) streamed(t *task, st *ledger.Task) {
	s := c.s
	conns, frames := s.hub.received(t.id)
	saved := ""
	if st.HasResult() || st.Result != "" {
		var out contract.GenerateOutput
		if json.Unmarshal([]byte(s.storedResult(st)), &out) == nil {
			saved = out.Text
		}
	}
	savedState := st.State == ledger.StateCompleted || st.State == ledger.StateAwaitingApproval
	stats := c.streamStats(t.kind)
	stats.tasks++
	stats.conns += len(conns)
	attempts := map[int]bool{}
	for _, conn := range conns {
		seq := map[int]int{}
		text := map[int]*strings.Builder{}
		doneOf := map[int]bool{}
		dones := 0
		for _, raw := range frames[conn] {
			stats.frames++
			f, err := parseFrame(raw)
			if err != nil || f.Attempt < 1 {
				c.add(t.kind, t.id, "stream_frame_unreadable", "connection %s received %.60q", conn, raw)
				continue
			}
			if f.Attempt > st.Attempts {
				c.add(t.kind, t.id, "stream_attempt_unknown", "a frame of attempt %d; the task had %d", f.Attempt, st.Attempts)
			}
			attempts[f.Attempt] = true
			if f.Done {
				dones++
				stats.dones++
				doneOf[f.Attempt] = true
				if !savedState || f.ResultSHA256 != st.ResultSHA256 || f.Attempt != st.Attempts {
					c.add(t.kind, t.id, "stream_done_not_saved", "done frame of attempt %d names %.12s; the task is %s with result_sha256 %.12s saved at attempt %d", f.Attempt, f.ResultSHA256, st.State, st.ResultSHA256, st.Attempts)
				}
				if b := text[f.Attempt]; b != nil && savedState && b.String() != saved {
					c.add(t.kind, t.id, "stream_text_not_result", "connection %s: attempt %d streamed %d bytes that are not the saved text (%d bytes)", conn, f.Attempt, b.Len(), len(saved))
				}
				continue
			}
			if doneOf[f.Attempt] {
				c.add(t.kind, t.id, "stream_delta_after_done", "connection %s: delta %d of attempt %d after its done frame", conn, f.Seq, f.Attempt)
			}
			if f.Seq != seq[f.Attempt]+1 {
				c.add(t.kind, t.id, "stream_seq_broken", "connection %s: attempt %d frame %d after frame %d", conn, f.Attempt, f.Seq, seq[f.Attempt])
			}
			seq[f.Attempt] = f.Seq
			if text[f.Attempt] == nil {
				text[f.Attempt] = &strings.Builder{}
			}
			text[f.Attempt].WriteString(f.Delta)
		}
		if dones > 1 {
			c.add(t.kind, t.id, "stream_done_twice", "connection %s received %d done frames", conn, dones)
		}
	}
	stats.attempts += len(attempts)
	if st.State == ledger.StateCompleted {
		stats.completed++
	}
	c.row(t.kind).Note = fmt.Sprintf("%d connections (%d reconnects after a drop), %d frames, %d done frames for %d completed tasks, %d attempts streamed",
		stats.conns, stats.conns-stats.tasks, stats.frames, stats.dones, stats.completed, stats.attempts)
}

type streamRowStats struct{ tasks, conns, frames, dones, completed, attempts int }

func (c *checker) streamStats(k Kind) *streamRowStats {
	if c.stream == nil {
		c.stream = map[Kind]*streamRowStats{}
	}
	if c.stream[k] == nil {
		c.stream[k] = &streamRowStats{}
	}
	return c.stream[k]
}
