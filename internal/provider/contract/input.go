package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Limits of a GenerateInput.
const (
	// MaxTokensLimit is the largest accepted GenerateInput.MaxTokens.
	MaxTokensLimit = 8192
	// MaxTemperature is the largest accepted GenerateInput.Temperature.
	MaxTemperature = 2.0
)

// Names accepted in GenerateInput.Simulate. They are the fault names of the
// simulated provider (internal/provider/simulated), which is the only
// provider that honours them; the others ignore the field.
const (
	SimulateAcceptLoseReply = "accept_lose_reply"
	SimulateThrottle        = "throttle"
	SimulateServerError     = "server_error"
	SimulateBadRequest      = "bad_request"
	SimulateCredentials     = "credentials"
	SimulateSlow            = "slow"
)

// SimulateNames returns the legal values of GenerateInput.Simulate, sorted.
func SimulateNames() []string {
	return []string{
		SimulateAcceptLoseReply,
		SimulateBadRequest,
		SimulateCredentials,
		SimulateServerError,
		SimulateSlow,
		SimulateThrottle,
	}
}

// GenerateInput is the schema of Request.Input for KindGenerate. The submit
// API validates task inputs with ParseGenerateInput, so a task that was
// accepted parses the same way in the worker.
type GenerateInput struct {
	// Prompt is the user message. Required and not blank unless Messages
	// is given; beside Messages it is the conversation's new user turn,
	// after every message (conversation.go).
	Prompt string `json:"prompt"`
	// Messages is a conversation (conversation.go): system, user and
	// assistant turns in order. Optional; see ValidateConversation for the
	// combinations with Prompt that are valid.
	Messages []Message `json:"messages,omitempty"`
	// ConversationID names the conversation the task belongs to (1 to
	// MaxConversationIDLength of [A-Za-z0-9_-]); optional. Providers do
	// not read it.
	ConversationID string `json:"conversation_id,omitempty"`
	// System is an optional system prompt.
	System string `json:"system,omitempty"`
	// MaxTokens caps the generated tokens: 0 means the provider's default,
	// otherwise 1..MaxTokensLimit.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature is optional, 0..MaxTemperature.
	Temperature *float64 `json:"temperature,omitempty"`
	// Simulate names a fault for the simulated provider to inject (one of
	// SimulateNames); other providers ignore it.
	Simulate string `json:"simulate,omitempty"`
}

// InputError is a task input that does not match the schema. ParseGenerateInput
// returns it wrapped by retrypolicy.Permanent. Its text names the field and the
// rule, never the field's value.
type InputError struct {
	// Field is the JSON name of the offending field; "" for the whole input.
	Field string
	// Problem says what is wrong, in words a caller can act on.
	Problem string
	// Code classifies a conversation error (the Code* constants of
	// conversation.go) so the API can answer it with its own problem
	// type; "" for every other error.
	Code string
}

// Error returns "invalid generate input: <field>: <problem>".
func (e *InputError) Error() string {
	if e.Field == "" {
		return "invalid generate input: " + e.Problem
	}
	return "invalid generate input: " + e.Field + ": " + e.Problem
}

var generateFields = []string{"prompt", "messages", "conversation_id", "system", "max_tokens", "temperature", "simulate"}

func inputErr(field, format string, args ...any) error {
	return retrypolicy.Permanent(&InputError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

// ParseGenerateInput parses and validates raw strictly: it must be one JSON
// object whose keys are exactly the GenerateInput field names (case-sensitive,
// no duplicates, no unknown fields) with values of the right types and within
// limits. Every error is an [*InputError] wrapped by retrypolicy.Permanent.
func ParseGenerateInput(raw json.RawMessage) (GenerateInput, error) {
	var in GenerateInput
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return in, inputErr("", "input is required and must be a JSON object")
	}
	if trimmed[0] != '{' {
		return in, inputErr("", "input must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.Token(); err != nil { // the '{'
		return in, syntaxErr(err)
	}
	seen := make(map[string]bool, len(generateFields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return in, syntaxErr(err)
		}
		key, _ := tok.(string)
		if !slices.Contains(generateFields, key) {
			return in, inputErr("", "unknown field %q; allowed fields are %s", clip(key, 40), strings.Join(generateFields, ", "))
		}
		if seen[key] {
			return in, inputErr(key, "appears more than once")
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return in, syntaxErr(err)
		}
		if err := decodeField(&in, key, val); err != nil {
			return in, err
		}
	}
	hasPrompt := seen["prompt"]
	if _, err := dec.Token(); err != nil { // the '}'
		return in, syntaxErr(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return in, inputErr("", "input must be a single JSON object with nothing after it")
	}
	return in, in.validate(hasPrompt)
}

func decodeField(in *GenerateInput, key string, val json.RawMessage) error {
	isNull := bytes.Equal(val, []byte("null"))
	switch key {
	case "prompt", "system", "simulate":
		var s string
		if !isNull && json.Unmarshal(val, &s) != nil {
			return inputErr(key, "must be a string")
		}
		switch key {
		case "prompt":
			in.Prompt = s
		case "system":
			in.System = s
		default:
			in.Simulate = s
		}
	case "messages":
		msgs, err := decodeMessages(val)
		if err != nil {
			return err
		}
		in.Messages = msgs
	case "conversation_id":
		var s string
		if isNull || json.Unmarshal(val, &s) != nil {
			return codedErr(CodeConversationID, key, "must be a string of 1 to %d characters [A-Za-z0-9_-]", MaxConversationIDLength)
		}
		in.ConversationID = s
		if !ValidConversationID(s) {
			return codedErr(CodeConversationID, key, "must be 1 to %d characters of [A-Za-z0-9_-]", MaxConversationIDLength)
		}
	case "max_tokens":
		if isNull {
			return nil
		}
		var n int
		if json.Unmarshal(val, &n) != nil {
			return inputErr(key, "must be an integer from 1 to %d", MaxTokensLimit)
		}
		in.MaxTokens = n
	case "temperature":
		if isNull {
			return nil
		}
		var f float64
		if json.Unmarshal(val, &f) != nil {
			return inputErr(key, "must be a number from 0 to %g", MaxTemperature)
		}
		in.Temperature = &f
	}
	return nil
}

func (in GenerateInput) validate(hasPrompt bool) error {
	switch {
	case in.Messages == nil && !hasPrompt:
		return codedErr(CodeEmpty, "prompt", "is required (or messages): a generate input needs a prompt, a conversation in messages, or both")
	case (hasPrompt || in.Messages == nil) && strings.TrimSpace(in.Prompt) == "":
		return inputErr("prompt", "is required and must not be blank")
	}
	if err := in.validateConversation(); err != nil {
		return err
	}
	if in.MaxTokens < 0 || in.MaxTokens > MaxTokensLimit {
		return inputErr("max_tokens", "must be an integer from 1 to %d (or omitted for the provider's default)", MaxTokensLimit)
	}
	if t := in.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > MaxTemperature) {
		return inputErr("temperature", "must be a number from 0 to %g", MaxTemperature)
	}
	if in.Simulate != "" && !slices.Contains(SimulateNames(), in.Simulate) {
		return inputErr("simulate", "must be one of %s", strings.Join(SimulateNames(), ", "))
	}
	return nil
}

func syntaxErr(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return inputErr("", "not valid JSON (at byte %d)", se.Offset)
	}
	return inputErr("", "not valid JSON")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// GenerateInputOf checks that req is of KindGenerate and parses its input.
// Errors are retrypolicy.Permanent.
func GenerateInputOf(req Request) (GenerateInput, error) {
	if req.Kind != "" && req.Kind != KindGenerate {
		return GenerateInput{}, retrypolicy.Permanent(fmt.Errorf("provider: unsupported task kind %q (want %q)", clip(req.Kind, 40), KindGenerate))
	}
	return ParseGenerateInput(req.Input)
}
