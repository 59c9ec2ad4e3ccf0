package ledger

import (
	"errors"
	"regexp"
)

// Conversation is the conversation a task belongs to (seed 003), embedded
// in Task. Both attributes are set by Create only and never change.
type Conversation struct {
	ConversationID string `dynamodbav:"conversation_id,omitempty"` // the caller's conversation id ("" for none)
	// ConversationKey is ConversationKey(scope, ConversationID): the
	// by_conversation partition, so a conversation id names tasks of its
	// own caller only.
	ConversationKey string `dynamodbav:"conv_key,omitempty"`
}

// ConversationKey is the by_conversation partition of a conversation of
// scope: "<scope>#<id>". The id holds no '#', so the key names one pair.
func ConversationKey(scope, id string) string { return scope + "#" + id }

// validConversationID: 1..128 of [A-Za-z0-9_-] (the API's rule, restated
// so the ledger never writes an ambiguous key).
var validConversationID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`).MatchString

// conversationOf is the Conversation a new task records.
func conversationOf(n NewTask) (Conversation, error) {
	if n.ConversationID == "" {
		return Conversation{}, nil
	}
	if !validConversationID(n.ConversationID) {
		return Conversation{}, errors.New("ledger: ConversationID must be 1-128 characters of [A-Za-z0-9_-]")
	}
	return Conversation{ConversationID: n.ConversationID, ConversationKey: ConversationKey(n.Scope, n.ConversationID)}, nil
}
