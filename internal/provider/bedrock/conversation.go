package bedrock

import (
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/taskledger/taskledger/internal/provider/contract"
)

// converseMessages maps a generate input to Converse: every system text
// (the system field, then system messages) to a SystemContentBlock, the
// user and assistant turns to Messages in order, the prompt last. Converse
// wants the roles to alternate, so consecutive turns of one role become
// one message with a text block each (nothing is dropped or joined).
// Validation guarantees the first turn and the last are the user's.
func converseMessages(in contract.GenerateInput) ([]types.SystemContentBlock, []types.Message) {
	texts, turns := in.Conversation()
	var system []types.SystemContentBlock
	for _, s := range texts {
		system = append(system, &types.SystemContentBlockMemberText{Value: s})
	}
	var out []types.Message
	for _, t := range turns {
		role := types.ConversationRoleUser
		if t.Role == contract.RoleAssistant {
			role = types.ConversationRoleAssistant
		}
		block := &types.ContentBlockMemberText{Value: t.Content}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, block)
			continue
		}
		out = append(out, types.Message{Role: role, Content: []types.ContentBlock{block}})
	}
	return system, out
}
