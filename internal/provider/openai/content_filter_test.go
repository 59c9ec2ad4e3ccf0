package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/openai"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// TestContentFilterIsNoRefusal: retrypolicy.Refused — exactly the
// worker's definiteRefusal, which decides that a failed call is charged
// nothing — must say false for a call the provider performed and billed.
// An OpenAI chat completion that answers HTTP 200 with finish_reason
// "content_filter" generated its completion (usage in the reply: billed)
// and then had it withheld. The adapter steers it Permanent with no
// StatusError in the chain (the HTTP exchange succeeded), so it must mark
// the call as one that acted: else Refused's fallback "PermanentInput
// without a response → refused before it was sent" would take it for a
// call that never happened and the worker would charge it zero, unseen by
// budgets and the daily quota (the worker package's
// TestContentFilteredCallsAreChargedTheirUsage shows the budget overrun
// that makes, through the Bedrock adapter's equivalent).
func TestContentFilterIsNoRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id":    "chatcmpl-l",
			"model": "gpt-l",
			"choices": []any{map[string]any{
				"message":       map[string]any{"role": "assistant", "content": ""},
				"finish_reason": "content_filter",
			}},
			"usage": map[string]any{"prompt_tokens": 60, "completion_tokens": 50},
		})
	}))
	defer srv.Close()
	p, err := openai.New(openai.Options{BaseURL: srv.URL, Model: "gpt-l",
		Key: openai.EnvKey("L_KEY", func(string) string { return "sk-test" }), HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, gerr := p.Generate(context.Background(), contract.Request{OperationID: "op-l", Input: json.RawMessage(`{"prompt":"write one line","max_tokens":50}`)})
	if gerr == nil {
		t.Fatal("setup: content_filter returned no error")
	}
	if retrypolicy.Refused(gerr) {
		t.Fatalf("the provider answered 200 and billed 60+50 tokens (finish_reason content_filter), yet Refused(%q)=true: "+
			"the worker charges the call nothing (DESIGN §13)", gerr)
	}
}
