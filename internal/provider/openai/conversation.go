package openai

import "github.com/taskledger/taskledger/internal/provider/contract"

// chatMessages maps a generate input to the chat completions "messages"
// array: the system field first (role system), then every message in
// order with its role, then the prompt as the last user message. For a
// prompt-only input that is [system?, user], as before.
func chatMessages(in contract.GenerateInput) []chatMessage {
	out := make([]chatMessage, 0, len(in.Messages)+2)
	if in.System != "" {
		out = append(out, chatMessage{Role: contract.RoleSystem, Content: in.System})
	}
	for _, m := range in.Messages {
		out = append(out, chatMessage{Role: m.Role, Content: m.Content})
	}
	if in.Prompt != "" {
		out = append(out, chatMessage{Role: contract.RoleUser, Content: in.Prompt})
	}
	return out
}

// quotesInput reports whether a server's error message quotes any text of
// the input (prompt, system, any message): such a message is withheld.
func quotesInput(msg string, in contract.GenerateInput) bool {
	if quotes(msg, in.Prompt) || quotes(msg, in.System) {
		return true
	}
	for _, m := range in.Messages {
		if quotes(msg, m.Content) {
			return true
		}
	}
	return false
}
