package bedrock_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
)

// converseSent is what a Converse request carries of a conversation.
type converseSent struct {
	Messages []struct {
		Role    string
		Content []struct {
			Text     string
			Document *struct{ Name string }
		}
	}
	System []struct{ Text string }
}

func (s converseSent) String() string {
	var b strings.Builder
	for _, sys := range s.System {
		b.WriteString("system:" + sys.Text + "|")
	}
	for _, m := range s.Messages {
		b.WriteString(m.Role + ":")
		for i, c := range m.Content {
			if i > 0 {
				b.WriteString("+")
			}
			if c.Document != nil {
				b.WriteString("[" + c.Document.Name + "]")
			}
			b.WriteString(c.Text)
		}
		b.WriteString("|")
	}
	return b.String()
}

func TestConversationMapsToConverseSystemAndMessages(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, input, want string }{
		{"system field and messages, system first",
			`{"system":"Be terse","messages":[{"role":"system","content":"Cite pages"},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"user","content":"q2"}]}`,
			"system:Be terse|system:Cite pages|user:q1|assistant:a1|user:q2|"},
		{"history with the prompt as the last turn",
			`{"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"a1"}],"prompt":"q2"}`,
			"user:q1|assistant:a1|user:q2|"},
		{"consecutive user turns become one message, every text kept",
			`{"messages":[{"role":"user","content":"q1"},{"role":"user","content":"q1 again"}]}`,
			"user:q1+q1 again|"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got converseSent
			p := setup(t, func(w http.ResponseWriter, r *http.Request) {
				if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
					t.Error(err)
				}
				respond(w, 200, "", okBody)
			})
			if _, err := p.Generate(t.Context(), contract.Request{OperationID: "op", Input: json.RawMessage(tc.input)}); err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Fatalf("sent %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestConversationDocumentsGoWithTheLastUserTurn(t *testing.T) {
	t.Parallel()
	var got converseSent
	p := setup(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		respond(w, 200, "", okBody)
	})
	doc := contract.Document{Name: "document-1", Format: "txt", ContentType: "text/plain", Bytes: []byte("decisions: A, B")}
	in := `{"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"user","content":"What does it decide?"}]}`
	if _, err := p.Generate(t.Context(), contract.Request{OperationID: "op", Input: json.RawMessage(in), Documents: []contract.Document{doc}}); err != nil {
		t.Fatal(err)
	}
	if want := "user:q1|assistant:a1|user:[document-1]+What does it decide?|"; got.String() != want {
		t.Fatalf("sent %s\nwant %s", got, want)
	}
}
