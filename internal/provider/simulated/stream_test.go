package simulated_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// The streamed deltas, concatenated, are the saved text, and they are the
// same text Generate returns for the same operation.
func TestStreamedDeltasConcatenateToTheResultText(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{Seed: 3})
	var deltas []string
	res, err := p.GenerateStream(t.Context(), req("op-stream", 1, prompt), func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	text := output(t, res).Text
	if len(deltas) < simulated.DefaultOutputWords {
		t.Fatalf("got %d deltas, want at least one per word (%d)", len(deltas), simulated.DefaultOutputWords)
	}
	if got := strings.Join(deltas, ""); got != text {
		t.Fatalf("deltas concatenate to %q, result text is %q", got, text)
	}
	again, err := p.Generate(t.Context(), req("op-stream", 2, prompt))
	if err != nil {
		t.Fatal(err)
	}
	if output(t, again).Text != text {
		t.Fatal("a streamed generation recorded another text than Generate returns for the operation")
	}
}

// Deltas arrive while the call is still running, at the configured pace.
func TestStreamPacesItsChunks(t *testing.T) {
	t.Parallel()
	const pace = 5 * time.Millisecond
	p := simulated.New(simulated.Options{StreamChunkDelay: pace})
	start := time.Now()
	var at []time.Duration
	res, err := p.GenerateStream(t.Context(), req("op-paced", 1, `{"prompt":"x","max_tokens":8}`), func(string) { at = append(at, time.Since(start)) })
	if err != nil {
		t.Fatal(err)
	}
	n := len(simulated.Chunks(output(t, res).Text))
	if len(at) != n {
		t.Fatalf("got %d deltas, want one per chunk (%d)", len(at), n)
	}
	if last, least := at[len(at)-1], time.Duration(n)*pace; last < least {
		t.Fatalf("last delta after %v, want at least %v (%d chunks at %v)", last, least, n, pace)
	}
}

// A stream cut by its context after the generation was performed is an
// uncertain outcome, not a result.
func TestStreamCutMidwayIsUncertain(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{StreamChunkDelay: time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n := 0
	_, err := p.GenerateStream(ctx, req("op-cut", 1, prompt), func(string) {
		if n++; n == 3 {
			cancel()
		}
	})
	if classOf(err) != retrypolicy.UnknownOutcome {
		t.Fatalf("error %v has class %v, want uncertain", err, classOf(err))
	}
	if n != 3 {
		t.Fatalf("%d deltas were passed after the cut, want none", n-3)
	}
	if evs := p.Events("op-cut"); len(evs) != 1 || evs[0].Outcome != simulated.OutcomeLostReply {
		t.Fatalf("events %+v, want one call with outcome lost_reply", evs)
	}
}

// A gate holds the stream at the chunk it refuses for as long as it
// refuses, whatever the pace, and sees the call's input; once it consents
// the rest follows and the call ends with its result.
func TestStreamGateHoldsTheReplyUntilItConsents(t *testing.T) {
	t.Parallel()
	const held = 2
	release := make(chan struct{})
	var prompts []string
	p := simulated.New(simulated.Options{StreamGate: func(ctx context.Context, in contract.GenerateInput, chunk int) error {
		prompts = append(prompts, in.Prompt)
		if chunk < held {
			return nil
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	deltas := make(chan string, 64)
	done := make(chan error, 1)
	go func() {
		_, err := p.GenerateStream(t.Context(), req("op-gated", 1, `{"prompt":"hold me","max_tokens":8}`), func(d string) { deltas <- d })
		done <- err
	}()
	for range held {
		<-deltas
	}
	// The stream is at the gate: the call is in flight and nothing more
	// is passed until the gate is opened.
	select {
	case d := <-deltas:
		t.Fatalf("delta %q passed while the gate held the stream", d)
	case err := <-done:
		t.Fatalf("the call ended (%v) while the gate held the stream", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("after the gate opened: %v", err)
	}
	if len(prompts) == 0 || prompts[0] != "hold me" {
		t.Fatalf("the gate saw prompts %q, want the call's", prompts)
	}
}

// A gate's error cuts the stream like a cancelled call: uncertain, with
// the generation performed.
func TestStreamGateErrorCutsTheStream(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{StreamGate: func(_ context.Context, _ contract.GenerateInput, chunk int) error {
		if chunk == 1 {
			return context.Canceled
		}
		return nil
	}})
	n := 0
	_, err := p.GenerateStream(t.Context(), req("op-gate-cut", 1, prompt), func(string) { n++ })
	if classOf(err) != retrypolicy.UnknownOutcome {
		t.Fatalf("error %v has class %v, want uncertain", err, classOf(err))
	}
	if n != 1 {
		t.Fatalf("%d deltas passed, want the one before the refusal", n)
	}
	if evs := p.Events("op-gate-cut"); len(evs) != 1 || evs[0].Outcome != simulated.OutcomeLostReply {
		t.Fatalf("events %+v, want one call with outcome lost_reply", evs)
	}
}

func TestChunksConcatenateToTheText(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a", " a", "a  b c ", "[x] y"} {
		if got := strings.Join(simulated.Chunks(s), ""); got != s {
			t.Errorf("Chunks(%q) joins to %q", s, got)
		}
	}
}

var _ contract.Streamer = (*simulated.Provider)(nil)
