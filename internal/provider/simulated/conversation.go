package simulated

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/taskledger/taskledger/internal/provider/contract"
)

// conversationText is what the messages add to the text the reply is
// derived from ("" without messages, so a prompt-only reply is as before).
func conversationText(in contract.GenerateInput) string {
	var b strings.Builder
	for _, m := range in.Messages {
		b.WriteString("\x00" + m.Role + "\x00" + m.Content)
	}
	return b.String()
}

// conversationNote follows the reply's prefix for a conversation: which
// turn it answers and a digest of the last user message (its SHA-256
// prefix and word count), so a test can tell replies to different turns
// apart without the text in the result.
func conversationNote(in contract.GenerateInput) string {
	if len(in.Messages) == 0 {
		return ""
	}
	_, turns := in.Conversation()
	users := 0
	for _, t := range turns {
		if t.Role == contract.RoleUser {
			users++
		}
	}
	last := in.LastUserMessage()
	sum := sha256.Sum256([]byte(last))
	return " [user turn " + strconv.Itoa(users) + ", last user message sha256:" + hex.EncodeToString(sum[:4]) +
		", " + strconv.Itoa(len(strings.Fields(last))) + " words]"
}

// conversationWords counts the messages' words (the simulated input tokens).
func conversationWords(in contract.GenerateInput) int {
	n := 0
	for _, m := range in.Messages {
		n += len(strings.Fields(m.Content))
	}
	return n
}
