package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Conversation limits (the API document publishes them). The whole input
// is also held to the API's input cap (32 KiB of canonical JSON, 413), so
// a long conversation is bounded twice: by count here, by bytes there.
const (
	// MaxMessages is the most messages one GenerateInput may carry.
	MaxMessages = 64
	// MaxMessageBytes is the longest one message's content, in bytes of
	// UTF-8.
	MaxMessageBytes = 16 << 10
	// MaxConversationIDLength is the longest ConversationID.
	MaxConversationIDLength = 128
	// MessageOverheadTokens bounds the framing one message adds to a
	// call's input tokens (role markers, separators), on top of its bytes.
	MessageOverheadTokens = 8
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Codes of the conversation errors (InputError.Code).
const (
	// CodeEmpty: neither prompt nor messages.
	CodeEmpty = "input_empty"
	// CodeMessage: a message that is not {"role","content"} with a known
	// role and non-blank text, or a conversation in an order no provider
	// takes (system after a turn, first turn not the user's, not ending
	// with the user's).
	CodeMessage = "invalid_message"
	// CodeTooManyMessages: more than MaxMessages.
	CodeTooManyMessages = "too_many_messages"
	// CodeMessageTooLarge: a content over MaxMessageBytes.
	CodeMessageTooLarge = "message_too_large"
	// CodeConversationID: conversation_id not 1..MaxConversationIDLength
	// of [A-Za-z0-9_-].
	CodeConversationID = "invalid_conversation_id"
)

// Message is one turn of a conversation.
type Message struct {
	// Role is RoleSystem, RoleUser or RoleAssistant.
	Role string `json:"role"`
	// Content is the turn's text; not blank, at most MaxMessageBytes.
	Content string `json:"content"`
}

func codedErr(code, field, format string, args ...any) error {
	return retrypolicy.Permanent(&InputError{Field: field, Problem: fmt.Sprintf(format, args...), Code: code})
}

// ValidConversationID reports whether s is 1..MaxConversationIDLength
// characters of [A-Za-z0-9_-] (no separator of the index key that holds
// it, nothing a URL path must escape).
func ValidConversationID(s string) bool {
	if len(s) == 0 || len(s) > MaxConversationIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// decodeMessages reads the "messages" member strictly: an array of 1 to
// MaxMessages objects with exactly "role" and "content".
func decodeMessages(val json.RawMessage) ([]Message, error) {
	var raws []json.RawMessage
	if bytes.Equal(val, []byte("null")) || json.Unmarshal(val, &raws) != nil {
		return nil, codedErr(CodeMessage, "messages", `must be an array of {"role": "system"|"user"|"assistant", "content": "<text>"}`)
	}
	if len(raws) == 0 {
		return nil, codedErr(CodeMessage, "messages", "must hold at least one message (or be omitted)")
	}
	if len(raws) > MaxMessages {
		return nil, codedErr(CodeTooManyMessages, "messages", "holds %d messages; at most %d are accepted", len(raws), MaxMessages)
	}
	out := make([]Message, 0, len(raws))
	for i, raw := range raws {
		field := "messages[" + strconv.Itoa(i) + "]"
		m, err := decodeMessage(raw, field)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func decodeMessage(raw json.RawMessage, field string) (Message, error) {
	var m Message
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return m, codedErr(CodeMessage, field, `must be an object {"role", "content"}`)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.Token(); err != nil {
		return m, codedErr(CodeMessage, field, "is not valid JSON")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return m, codedErr(CodeMessage, field, "is not valid JSON")
		}
		key, _ := tok.(string)
		if key != "role" && key != "content" {
			return m, codedErr(CodeMessage, field, `unknown field %q; a message has "role" and "content" only`, clip(key, 40))
		}
		if seen[key] {
			return m, codedErr(CodeMessage, field+"."+key, "appears more than once")
		}
		seen[key] = true
		var s string
		if err := dec.Decode(&s); err != nil {
			return m, codedErr(CodeMessage, field+"."+key, "must be a string")
		}
		if key == "role" {
			m.Role = s
		} else {
			m.Content = s
		}
	}
	switch {
	case !slices.Contains([]string{RoleSystem, RoleUser, RoleAssistant}, m.Role):
		return m, codedErr(CodeMessage, field+".role", `must be "system", "user" or "assistant"`)
	case strings.TrimSpace(m.Content) == "":
		return m, codedErr(CodeMessage, field+".content", "is required and must not be blank")
	case len(m.Content) > MaxMessageBytes:
		return m, codedErr(CodeMessageTooLarge, field+".content", "is %d bytes; at most %d are accepted per message", len(m.Content), MaxMessageBytes)
	}
	return m, nil
}

// validateConversation checks the order of the turns: system messages
// only before the first user or assistant message; the first of those is
// the user's; and the conversation (the messages, then Prompt as a last
// user turn when given) ends with the user's turn, the one answered.
func (in GenerateInput) validateConversation() error {
	if len(in.Messages) == 0 {
		return nil
	}
	turns := 0
	for i, m := range in.Messages {
		field := "messages[" + strconv.Itoa(i) + "].role"
		switch {
		case m.Role == RoleSystem && turns > 0:
			return codedErr(CodeMessage, field, "a system message must come before every user and assistant message")
		case m.Role == RoleAssistant && turns == 0:
			return codedErr(CodeMessage, field, "the first message after the system messages must be the user's")
		}
		if m.Role != RoleSystem {
			turns++
		}
	}
	if in.Prompt != "" {
		return nil // the prompt is the user's last turn
	}
	if last := in.Messages[len(in.Messages)-1]; last.Role != RoleUser {
		return codedErr(CodeMessage, "messages["+strconv.Itoa(len(in.Messages)-1)+"].role",
			"the last message must be the user's (the turn to answer), or give the new user turn in prompt")
	}
	return nil
}

// Conversation returns what a provider sends: the system texts (System
// first, then every system message, in order) and the user and assistant
// turns in order, Prompt last as a user turn when given. For a
// prompt-only input it is (System if set, [{user, Prompt}]).
func (in GenerateInput) Conversation() (system []string, turns []Message) {
	if in.System != "" {
		system = append(system, in.System)
	}
	for _, m := range in.Messages {
		if m.Role == RoleSystem {
			system = append(system, m.Content)
			continue
		}
		turns = append(turns, m)
	}
	if in.Prompt != "" {
		turns = append(turns, Message{Role: RoleUser, Content: in.Prompt})
	}
	return system, turns
}

// LastUserMessage is the turn a generation answers: Prompt when given,
// else the last message (which validation requires to be the user's).
func (in GenerateInput) LastUserMessage() string {
	if in.Prompt != "" || len(in.Messages) == 0 {
		return in.Prompt
	}
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if in.Messages[i].Role == RoleUser {
			return in.Messages[i].Content
		}
	}
	return ""
}

// messageBytes is the bound the messages add to a call's input tokens:
// each content's bytes plus MessageOverheadTokens.
func (in GenerateInput) messageBytes() int64 {
	var n int64
	for _, m := range in.Messages {
		n += int64(len(m.Content)) + MessageOverheadTokens
	}
	return n
}
