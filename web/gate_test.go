package web_test

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/taskledger/taskledger/internal/provider/contract"
)

// streamGate holds the simulated provider's streamed replies at the word a
// browser script names (provider.Config.SimulatedStreamGate), per prompt:
// a script that must see a reply grow, or stop it mid-way, holds it there
// for as long as the page needs, however slow the machine, instead of
// racing a pace. A reply to a prompt no script named streams freely.
type streamGate struct {
	mu      sync.Mutex
	allow   map[string]int // prompt → words that may stream; < 0: all
	changed chan struct{}  // closed and replaced on every change
}

func newStreamGate() *streamGate {
	return &streamGate{allow: map[string]int{}, changed: make(chan struct{})}
}

// gateLine is a script's stdout line that sets the gate
// (web/test/harness.mjs streamGate); the test answers "ok" on its stdin.
type gateLine struct {
	Gate *struct {
		Prompt string `json:"prompt"`
		Allow  int    `json:"allow"`
	} `json:"gate"`
}

// set lets replies to prompt stream their first n words (n < 0: all).
func (g *streamGate) set(prompt string, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.allow[prompt] = n
	close(g.changed)
	g.changed = make(chan struct{})
}

// wait is the provider's gate: it returns once chunk may stream, or with
// ctx's error (a Stop cuts a held reply this way).
func (g *streamGate) wait(ctx context.Context, in contract.GenerateInput, chunk int) error {
	key := gateKey(in)
	for {
		g.mu.Lock()
		n, named := g.allow[key]
		changed := g.changed
		g.mu.Unlock()
		if !named || n < 0 || chunk < n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// gateKey is the prompt a script names for in: its prompt, or else the
// conversation's last user turn (what the Chat tab sends).
func gateKey(in contract.GenerateInput) string {
	if in.Prompt != "" {
		return in.Prompt
	}
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if in.Messages[i].Role == contract.RoleUser {
			return in.Messages[i].Content
		}
	}
	return ""
}

// parseGateLine reports whether line is a gate line, and its prompt and
// allowance.
func parseGateLine(line []byte) (prompt string, allow int, ok bool) {
	var l gateLine
	if json.Unmarshal(line, &l) != nil || l.Gate == nil {
		return "", 0, false
	}
	return l.Gate.Prompt, l.Gate.Allow, true
}
