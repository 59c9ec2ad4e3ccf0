package openai_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
)

func TestConversationMapsToChatMessages(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, input, want string }{
		{"system field, messages in order",
			`{"system":"Be terse","messages":[{"role":"system","content":"Cite pages"},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"user","content":"q2"}]}`,
			`[{"role":"system","content":"Be terse"},{"role":"system","content":"Cite pages"},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"user","content":"q2"}]`},
		{"history then the prompt as the last user message",
			`{"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"a1"}],"prompt":"q2"}`,
			`[{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"user","content":"q2"}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body map[string]json.RawMessage
			b := setup(t, func(w http.ResponseWriter, r *http.Request) {
				if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
					t.Error(err)
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, okBody)
			})
			if _, err := b.p.Generate(t.Context(), contract.Request{OperationID: "op", Input: json.RawMessage(tc.input)}); err != nil {
				t.Fatal(err)
			}
			if got := string(body["messages"]); got != tc.want {
				t.Fatalf("messages %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestErrorQuotingAMessageIsWithheld(t *testing.T) {
	t.Parallel()
	const secret = "the confidential history turn"
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `{"error":{"message":"bad input near '`+secret+`'","type":"invalid_request_error"}}`)
	})
	in := `{"messages":[{"role":"user","content":"` + secret + `"},{"role":"assistant","content":"ok"},{"role":"user","content":"next"}]}`
	_, err := b.p.Generate(t.Context(), contract.Request{OperationID: "op", Input: json.RawMessage(in)})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("error %v quotes a message", err)
	}
}
