package contract_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
)

func TestConversationInputsThatAreValid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, raw  string
		wantSystem []string
		wantTurns  []contract.Message
		wantLast   string
	}{
		{"prompt alone, as before", `{"prompt":"hi","system":"s"}`,
			[]string{"s"}, []contract.Message{{Role: "user", Content: "hi"}}, "hi"},
		{"messages ending with the user's turn",
			`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"user","content":"q2"}],"conversation_id":"c-1"}`,
			[]string{"be brief"}, []contract.Message{{Role: "user", Content: "q1"}, {Role: "assistant", Content: "a1"}, {Role: "user", Content: "q2"}}, "q2"},
		{"history beside a prompt, the prompt is the last turn",
			`{"system":"top","messages":[{"role":"system","content":"more"},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"}],"prompt":"q2"}`,
			[]string{"top", "more"}, []contract.Message{{Role: "user", Content: "q1"}, {Role: "assistant", Content: "a1"}, {Role: "user", Content: "q2"}}, "q2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, err := contract.ParseGenerateInput(json.RawMessage(tc.raw))
			if err != nil {
				t.Fatalf("ParseGenerateInput: %v", err)
			}
			sys, turns := in.Conversation()
			if strings.Join(sys, "|") != strings.Join(tc.wantSystem, "|") {
				t.Fatalf("system = %q, want %q", sys, tc.wantSystem)
			}
			if len(turns) != len(tc.wantTurns) {
				t.Fatalf("turns = %+v, want %+v", turns, tc.wantTurns)
			}
			for i := range turns {
				if turns[i] != tc.wantTurns[i] {
					t.Fatalf("turn %d = %+v, want %+v", i, turns[i], tc.wantTurns[i])
				}
			}
			if got := in.LastUserMessage(); got != tc.wantLast {
				t.Fatalf("LastUserMessage = %q, want %q", got, tc.wantLast)
			}
		})
	}
}

func TestConversationInputsThatAreRefused(t *testing.T) {
	t.Parallel()
	many := `{"messages":[` + strings.Repeat(`{"role":"user","content":"x"},`, contract.MaxMessages) + `{"role":"user","content":"x"}]}`
	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", contract.MaxMessageBytes+1) + `"}]}`
	cases := []struct{ name, raw, code, field string }{
		{"neither prompt nor messages", `{"system":"s"}`, contract.CodeEmpty, "prompt"},
		{"empty messages", `{"messages":[]}`, contract.CodeMessage, "messages"},
		{"messages not an array", `{"messages":{"role":"user"}}`, contract.CodeMessage, "messages"},
		{"unknown role", `{"messages":[{"role":"tool","content":"x"}]}`, contract.CodeMessage, "messages[0].role"},
		{"missing role", `{"messages":[{"content":"x"}]}`, contract.CodeMessage, "messages[0].role"},
		{"empty content", `{"messages":[{"role":"user","content":""}]}`, contract.CodeMessage, "messages[0].content"},
		{"blank content", `{"messages":[{"role":"user","content":" \n"}]}`, contract.CodeMessage, "messages[0].content"},
		{"content not text", `{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, contract.CodeMessage, "messages[0].content"},
		{"unknown message field", `{"messages":[{"role":"user","content":"x","name":"bob"}]}`, contract.CodeMessage, "messages[0]"},
		{"last message not the user's", `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]}`, contract.CodeMessage, "messages[1].role"},
		{"assistant first", `{"messages":[{"role":"assistant","content":"a"},{"role":"user","content":"q"}]}`, contract.CodeMessage, "messages[0].role"},
		{"system after a turn", `{"messages":[{"role":"user","content":"q"},{"role":"system","content":"s"},{"role":"user","content":"q"}]}`, contract.CodeMessage, "messages[1].role"},
		{"too many messages", many, contract.CodeTooManyMessages, "messages"},
		{"message too large", big, contract.CodeMessageTooLarge, "messages[0].content"},
		{"blank prompt beside messages", `{"prompt":" ","messages":[{"role":"user","content":"q"}]}`, "", "prompt"},
		{"conversation id with a slash", `{"prompt":"x","conversation_id":"a/b"}`, contract.CodeConversationID, "conversation_id"},
		{"conversation id with a hash", `{"prompt":"x","conversation_id":"a#b"}`, contract.CodeConversationID, "conversation_id"},
		{"conversation id empty", `{"prompt":"x","conversation_id":""}`, contract.CodeConversationID, "conversation_id"},
		{"conversation id too long", `{"prompt":"x","conversation_id":"` + strings.Repeat("c", contract.MaxConversationIDLength+1) + `"}`, contract.CodeConversationID, "conversation_id"},
		{"conversation id not a string", `{"prompt":"x","conversation_id":7}`, contract.CodeConversationID, "conversation_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := contract.ParseGenerateInput(json.RawMessage(tc.raw))
			var ie *contract.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want an *InputError", err)
			}
			if ie.Code != tc.code || ie.Field != tc.field {
				t.Fatalf("code %q field %q (%v), want code %q field %q", ie.Code, ie.Field, err, tc.code, tc.field)
			}
		})
	}
}

func TestConversationIDAcceptsItsWholeCharset(t *testing.T) {
	t.Parallel()
	id := "Az09_-" + strings.Repeat("x", contract.MaxConversationIDLength-6)
	in, err := contract.ParseGenerateInput(json.RawMessage(`{"prompt":"x","conversation_id":"` + id + `"}`))
	if err != nil || in.ConversationID != id {
		t.Fatalf("ParseGenerateInput = %+v, %v", in, err)
	}
}

func TestCallMaximumCountsEveryMessage(t *testing.T) {
	t.Parallel()
	prompt, _ := contract.CallMaximum(contract.GenerateInput{Prompt: "abcd"})
	conv, _ := contract.CallMaximum(contract.GenerateInput{Prompt: "abcd", Messages: []contract.Message{
		{Role: "user", Content: "0123456789"}, {Role: "assistant", Content: "01234"}}})
	if want := prompt + 15 + 2*contract.MessageOverheadTokens; conv != want {
		t.Fatalf("input bound with messages = %d, want %d (prompt-only bound %d)", conv, want, prompt)
	}
}
