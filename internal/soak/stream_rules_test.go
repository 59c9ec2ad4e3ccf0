package soak

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/stream"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// streamSetup is a soak with a stream hub and one completed task whose
// saved result's text is text, saved by attempt 2.
func streamSetup(t *testing.T, k Kind, text string) (*soak, *task, *ledger.Task) {
	t.Helper()
	s := &soak{byID: map[string]*task{}, injected: map[Kind]int{}, hub: newStreamHub()}
	tk := &task{id: "t_stream", kind: k}
	s.byID[tk.id] = tk
	out, _ := json.Marshal(contract.GenerateOutput{Text: text})
	st := &ledger.Task{TaskID: tk.id, State: ledger.StateCompleted, Attempts: 2, Result: string(out)}
	st.ResultSHA256 = ledger.SHA256Hex(string(out))
	return s, tk, st
}

func post(t *testing.T, s *soak, conn string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := s.hub.PostToConnection(context.Background(), conn, b); err != nil {
		t.Fatalf("post: %v", err)
	}
}

func streamRules(s *soak, tk *task, st *ledger.Task) []string {
	c := &checker{s: s, rows: map[Kind]*Row{}}
	c.streamed(tk, st)
	var out []string
	for _, v := range c.violations {
		out = append(out, v.Rule)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// A stream whose attempt 1 broke off and whose attempt 2 ends with the
// saved result's hash passes; a done frame naming another hash, deltas
// after the done frame, a broken seq, a done frame of an attempt that did
// not save, and streamed text that is not the result are each caught.
func TestStreamRules(t *testing.T) {
	t.Parallel()
	const text = "the saved reply"
	delta := func(attempt, seq int, d string) stream.DeltaFrame {
		return stream.DeltaFrame{TaskID: "t_stream", Attempt: attempt, Seq: seq, Delta: d}
	}
	done := func(attempt int, sha string) stream.DoneFrame {
		return stream.DoneFrame{TaskID: "t_stream", Attempt: attempt, Done: true, State: "completed", ResultSHA256: sha}
	}

	s, tk, st := streamSetup(t, StreamRetried, text)
	c := s.hub.subscribe(tk.id, 0)
	post(t, s, c, delta(1, 1, "a partial"))
	post(t, s, c, delta(2, 1, "the saved"))
	post(t, s, c, delta(2, 2, " reply"))
	post(t, s, c, done(2, st.ResultSHA256))
	if got := streamRules(s, tk, st); len(got) != 0 {
		t.Fatalf("a clean retried stream: %v", got)
	}

	cases := []struct {
		name   string
		frames []any
		want   string
	}{
		{"another hash", []any{delta(2, 1, text), done(2, "00ff")}, "stream_done_not_saved"},
		{"delta after done", []any{delta(2, 1, text), done(2, st.ResultSHA256), delta(2, 2, "more")}, "stream_delta_after_done"},
		{"seq gap", []any{delta(2, 1, "the saved"), delta(2, 3, " reply"), done(2, st.ResultSHA256)}, "stream_seq_broken"},
		{"done of an attempt that saved nothing", []any{delta(1, 1, text), done(1, st.ResultSHA256)}, "stream_done_not_saved"},
		{"text not the result", []any{delta(2, 1, "other words"), done(2, st.ResultSHA256)}, "stream_text_not_result"},
		{"two done frames", []any{delta(2, 1, text), done(2, st.ResultSHA256), done(2, st.ResultSHA256)}, "stream_done_twice"},
	}
	for _, tc := range cases {
		s, tk, st := streamSetup(t, StreamOK, text)
		c := s.hub.subscribe(tk.id, 0)
		for _, f := range tc.frames {
			post(t, s, c, f)
		}
		if got := streamRules(s, tk, st); !slices.Contains(got, tc.want) {
			t.Errorf("%s: rules %v, want %s", tc.name, got, tc.want)
		}
	}

	// A done frame for a task that was parked: no result was saved.
	s, tk, st = streamSetup(t, StreamKilled, text)
	st.State, st.Result, st.ResultSHA256 = ledger.StateNeedsReview, "", ""
	c = s.hub.subscribe(tk.id, 0)
	post(t, s, c, delta(1, 1, text))
	post(t, s, c, done(1, ledger.SHA256Hex(text)))
	if got := streamRules(s, tk, st); !slices.Contains(got, "stream_done_not_saved") {
		t.Errorf("a done frame of a parked task: %v", got)
	}
}
