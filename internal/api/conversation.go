package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Problem types of conversations (seed 003). Each is a 400 with field
// naming the member (e.g. input.messages[2].role); nothing is written.
const (
	// TypeInputEmpty: a generate input with neither prompt nor messages.
	TypeInputEmpty = ProblemBase + "input-empty"
	// TypeInvalidMessage: a message without a known role or with blank
	// content, an unknown member, or turns in an order no provider takes.
	TypeInvalidMessage = ProblemBase + "invalid-message"
	// TypeTooManyMessages: more than contract.MaxMessages messages.
	TypeTooManyMessages = ProblemBase + "too-many-messages"
	// TypeMessageTooLarge: one message over contract.MaxMessageBytes.
	TypeMessageTooLarge = ProblemBase + "message-too-large"
	// TypeInvalidConversationID: conversation_id not 1-128 of
	// [A-Za-z0-9_-], or a regenerate's input naming another conversation
	// than its parent's.
	TypeInvalidConversationID = ProblemBase + "invalid-conversation-id"
)

// Page sizes of GET /conversations/{id}.
const (
	DefaultConversationPage = 20
	MaxConversationPage     = tasklist.MaxConversationPage
)

// inputProblem is the problem type and title of a generate input error
// with code (contract.InputError.Code).
func inputProblem(code string) (typ, title string) {
	switch code {
	case contract.CodeEmpty:
		return TypeInputEmpty, "Prompt or messages required"
	case contract.CodeMessage:
		return TypeInvalidMessage, "Invalid message"
	case contract.CodeTooManyMessages:
		return TypeTooManyMessages, "Too many messages"
	case contract.CodeMessageTooLarge:
		return TypeMessageTooLarge, "Message too large"
	case contract.CodeConversationID:
		return TypeInvalidConversationID, "Invalid conversation_id"
	}
	return TypeInvalidInput, "Invalid task input"
}

// conversationIDOf is the conversation_id of a canonical generate input
// ("" for none, and for any other kind's input).
func conversationIDOf(kind, input string) string {
	if kind != contract.KindGenerate || input == "" {
		return ""
	}
	var in struct {
		ConversationID string `json:"conversation_id"`
	}
	_ = json.Unmarshal([]byte(input), &in)
	return in.ConversationID
}

// regenerateConversation checks a regenerate's replacing input against
// its parent's conversation: a regenerate is another answer in the same
// conversation, so the input names the parent's conversation_id (none
// when the parent has none). No replacing input: nothing to check.
func regenerateConversation(parent *ledger.Task, input string) *Problem {
	if input == "" {
		return nil
	}
	if got := conversationIDOf(contract.KindGenerate, input); got != parent.ConversationID {
		detail := "A regenerate stays in its parent's conversation: input.conversation_id must be the parent's"
		if parent.ConversationID == "" {
			detail = "A regenerate stays in its parent's conversation, and the parent has none: input.conversation_id must be absent"
		}
		return newProblem(TypeInvalidConversationID, http.StatusBadRequest, "Invalid conversation_id", detail+"; nothing was recorded.").
			withField("input.conversation_id")
	}
	return nil
}

// ConversationView is the body of GET /conversations/{id}.
type ConversationView struct {
	ConversationID string                 `json:"conversation_id"`
	Tasks          []ConversationTaskView `json:"tasks"`
	// NextCursor, when present, is passed as ?cursor= for the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ConversationTaskView is one task of a conversation.
type ConversationTaskView struct {
	TaskID       string `json:"task_id"`
	State        string `json:"state"`
	CreatedAt    string `json:"created_at"`
	ParentTaskID string `json:"parent_task_id,omitempty"`
	// URL is the task's own view (GET /tasks/{id}).
	URL string `json:"url"`
	// LastUserMessage is the turn the task answers: its input's prompt,
	// or the last of its messages.
	LastUserMessage string `json:"last_user_message"`
	// Result is the saved result when it is kept in the item; a result in
	// the payload bucket is described by ResultBytes and ResultSHA256 and
	// read at URL.
	Result       json.RawMessage `json:"result,omitempty"`
	ResultBytes  int64           `json:"result_bytes,omitempty"`
	ResultSHA256 string          `json:"result_sha256,omitempty"`
	Error        *ErrorView      `json:"error,omitempty"`
	Progress     *ProgressView   `json:"progress,omitempty"`
}

// conversation serves GET /conversations/{id}: the caller's tasks in the
// conversation, oldest first, one page. A conversation id is the caller's
// own: another caller's id (or one never used) is an empty page, so an id
// reveals nothing.
func (h *Handler) conversation(ctx context.Context, c *call) events.APIGatewayV2HTTPResponse {
	id := c.route.taskID
	if !contract.ValidConversationID(id) {
		return h.reject(c, newProblem(TypeInvalidConversationID, http.StatusBadRequest, "Invalid conversation id",
			fmt.Sprintf("A conversation id is 1-%d characters of [A-Za-z0-9_-].", contract.MaxConversationIDLength)).withField("id"))
	}
	q := c.req.QueryStringParameters
	limit := DefaultConversationPage
	if s, ok := q["limit"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxConversationPage {
			return h.reject(c, newProblem(TypeInvalidQuery, http.StatusBadRequest, "Invalid limit",
				fmt.Sprintf("limit must be an integer from 1 to %d.", MaxConversationPage)).withField("limit"))
		}
		limit = n
	}
	var after *tasklist.ConversationCursor
	if s, ok := q["cursor"]; ok {
		cur, err := decodeCursor(s)
		if err != nil {
			return h.reject(c, newProblem(TypeInvalidQuery, http.StatusBadRequest, "Invalid cursor",
				"cursor must be a next_cursor this endpoint returned.").withField("cursor"))
		}
		after = &cur
	}
	page, err := tasklist.New(h.Ledger).ConversationTasks(ctx, c.scope, id, limit, after)
	if err != nil {
		return h.storeFailure(ctx, c, "conversation", err)
	}
	out := ConversationView{ConversationID: id, Tasks: make([]ConversationTaskView, 0, len(page.Tasks))}
	now := h.now()
	for _, t := range page.Tasks {
		v, p := h.conversationTask(ctx, c, t)
		if p != nil {
			return h.reject(c, p)
		}
		v.Progress = progressOf(t, now, nil)
		out.Tasks = append(out.Tasks, v)
	}
	if page.Next != nil {
		out.NextCursor = encodeCursor(*page.Next)
	}
	body, err := json.Marshal(out)
	if err != nil {
		return internalError().response()
	}
	c.outcome = "read"
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Body: string(body), Headers: map[string]string{
		"Content-Type":           "application/json",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	}}
}

func (h *Handler) conversationTask(ctx context.Context, c *call, t *ledger.Task) (ConversationTaskView, *Problem) {
	v := ConversationTaskView{
		TaskID:       t.TaskID,
		State:        string(t.State),
		CreatedAt:    t.CreatedAt,
		ParentTaskID: t.ParentTaskID,
		URL:          c.route.prefix + "/tasks/" + t.TaskID,
	}
	input, p := h.inputOf(ctx, c, t)
	if p != nil {
		return v, p
	}
	if in, err := contract.ParseGenerateInput(json.RawMessage(input)); err == nil {
		v.LastUserMessage = in.LastUserMessage()
	}
	if showsResult(t) {
		switch {
		case t.Result != "":
			if json.Valid([]byte(t.Result)) {
				v.Result = json.RawMessage(t.Result)
			} else {
				v.Result, _ = json.Marshal(t.Result)
			}
		case t.ResultRef != nil:
			v.ResultBytes, v.ResultSHA256 = t.ResultRef.Size, t.ResultRef.SHA256
		}
	}
	if t.State != ledger.StateCompleted && t.ErrorClass != "" {
		v.Error = &ErrorView{Class: t.ErrorClass, Message: t.ErrorMessage}
	}
	return v, nil
}

// The cursor is opaque to callers: base64url of the ledger's cursor. It
// carries no scope; the page is always read under the caller's own key.
func encodeCursor(c tasklist.ConversationCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.String()))
}

func decodeCursor(s string) (tasklist.ConversationCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return tasklist.ConversationCursor{}, err
	}
	return tasklist.ParseConversationCursor(string(b))
}
