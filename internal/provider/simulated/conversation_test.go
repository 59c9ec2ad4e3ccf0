package simulated_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/simulated"
)

func TestConversationReplyIsDerivedFromTheLastUserMessage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := simulated.New(simulated.Options{Seed: 3})
	const history = `{"role":"system","content":"be brief"},{"role":"user","content":"first secret question"},{"role":"assistant","content":"an answer"}`
	a, err := p.Generate(ctx, req("op-a", 1, `{"messages":[`+history+`,{"role":"user","content":"why is that so"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Generate(ctx, req("op-b", 1, `{"messages":[`+history+`],"prompt":"and then what"}`))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("why is that so"))
	want := "[user turn 2, last user message sha256:" + hex.EncodeToString(sum[:4]) + ", 4 words]"
	oa, ob := output(t, a), output(t, b)
	if !strings.Contains(oa.Text, want) {
		t.Fatalf("reply %q does not name the turn it answers (%s)", oa.Text, want)
	}
	if oa.Text == ob.Text || !strings.Contains(ob.Text, "3 words]") {
		t.Fatalf("replies to different last turns:\n%s\n%s", oa.Text, ob.Text)
	}
	if strings.Contains(oa.Text, "secret") || strings.Contains(oa.Text, "why is") {
		t.Fatalf("reply echoes the conversation: %s", oa.Text)
	}
	// be brief (2) + first secret question (3) + an answer (2) + why is that so (4)
	if oa.Usage.InputTokens != 11 {
		t.Fatalf("input tokens %d, want 11 (every message's words)", oa.Usage.InputTokens)
	}
}
