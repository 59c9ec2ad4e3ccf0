package destination

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Limits of a deliver input.
const (
	// MaxInputBytes caps the whole deliver input.
	MaxInputBytes = 48 << 10
	// MaxParamsBytes caps the params object.
	MaxParamsBytes = 4 << 10
	// MaxPayloadBytes caps the payload object.
	MaxPayloadBytes = 32 << 10
	// MaxNameLen caps a destination name.
	MaxNameLen = 64
)

// DeliverInput is the input of a deliver task:
//
//	{"destination":"notify","params":{"to":"requester@example.com"},"payload":{...}}
type DeliverInput struct {
	// Destination names a registered destination.
	Destination string `json:"destination"`
	// Params is a JSON object of destination-specific parameters ({} if
	// absent); the destination parses it strictly.
	Params json.RawMessage `json:"params"`
	// Payload is the JSON object delivered, exactly as submitted.
	Payload json.RawMessage `json:"payload"`
}

// InputError is a deliver input that does not match the schema. Its text
// names the field and the rule, never a value from params or payload.
type InputError struct {
	// Field is the JSON name of the offending field; "" for the whole input.
	Field string
	// Problem says what is wrong, in words a caller can act on.
	Problem string
}

// Error returns "invalid deliver input: <field>: <problem>".
func (e *InputError) Error() string {
	if e.Field == "" {
		return "invalid deliver input: " + e.Problem
	}
	return "invalid deliver input: " + e.Field + ": " + e.Problem
}

var deliverFields = []string{"destination", "params", "payload"}

func inputErr(field, format string, args ...any) error {
	return retrypolicy.Permanent(&InputError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

// ParseDeliverInput parses raw strictly: one JSON object whose keys are
// exactly "destination" (required, a valid name), "params" (optional JSON
// object, at most MaxParamsBytes) and "payload" (required JSON object, at
// most MaxPayloadBytes); unknown, mis-cased or repeated keys are rejected,
// and nothing may follow the object. Params and Payload keep their exact
// bytes (so the payload hash is that of what was submitted). Every error is
// an [*InputError] wrapped by retrypolicy.Permanent and never quotes a value.
func ParseDeliverInput(raw json.RawMessage) (DeliverInput, error) {
	var in DeliverInput
	if len(raw) > MaxInputBytes {
		return in, inputErr("", "is %d bytes, more than the %d allowed", len(raw), MaxInputBytes)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return in, inputErr("", "input is required and must be a JSON object")
	}
	if trimmed[0] != '{' {
		return in, inputErr("", "input must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.Token(); err != nil {
		return in, syntaxErr(err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return in, syntaxErr(err)
		}
		key, _ := tok.(string)
		if !slices.Contains(deliverFields, key) {
			return in, inputErr("", "unknown field %q; allowed fields are %s", Clip(key, 40), strings.Join(deliverFields, ", "))
		}
		if seen[key] {
			return in, inputErr(key, "appears more than once")
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return in, syntaxErr(err)
		}
		if err := decodeDeliverField(&in, key, val); err != nil {
			return in, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return in, syntaxErr(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return in, inputErr("", "input must be a single JSON object with nothing after it")
	}
	if in.Destination == "" {
		return in, inputErr("destination", "is required")
	}
	if in.Payload == nil {
		return in, inputErr("payload", "is required and must be a JSON object")
	}
	if in.Params == nil {
		in.Params = json.RawMessage(`{}`)
	}
	return in, nil
}

func decodeDeliverField(in *DeliverInput, key string, val json.RawMessage) error {
	switch key {
	case "destination":
		var s string
		if json.Unmarshal(val, &s) != nil {
			return inputErr(key, "must be a string")
		}
		if !ValidName(s) {
			return inputErr(key, "must be 1 to %d characters: lowercase letters, digits, '_' or '-', starting with a letter", MaxNameLen)
		}
		in.Destination = s
	case "params":
		if bytes.Equal(val, []byte("null")) {
			return nil
		}
		if len(val) == 0 || val[0] != '{' {
			return inputErr(key, "must be a JSON object")
		}
		if len(val) > MaxParamsBytes {
			return inputErr(key, "is %d bytes, more than the %d allowed", len(val), MaxParamsBytes)
		}
		in.Params = slices.Clone(val)
	case "payload":
		if len(val) == 0 || val[0] != '{' {
			return inputErr(key, "must be a JSON object")
		}
		if len(val) > MaxPayloadBytes {
			return inputErr(key, "is %d bytes, more than the %d allowed", len(val), MaxPayloadBytes)
		}
		in.Payload = slices.Clone(val)
	}
	return nil
}

// validName reports whether s is a destination name: a lowercase letter,
// then lowercase letters, digits, '_' or '-', at most MaxNameLen in all.
func ValidName(s string) bool {
	if s == "" || len(s) > MaxNameLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func syntaxErr(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return inputErr("", "not valid JSON (at byte %d)", se.Offset)
	}
	return inputErr("", "not valid JSON")
}

// ParamsError is destination params that do not match the destination's
// schema. Destinations return it wrapped by retrypolicy.Permanent; its text
// names the destination, the field and the rule, never a value.
type ParamsError struct {
	// Destination is the destination's name.
	Destination string
	// Field is the params field at fault; "" for the whole object.
	Field string
	// Problem says what is wrong.
	Problem string
}

// Error returns "invalid <destination> params: <field>: <problem>".
func (e *ParamsError) Error() string {
	if e.Field == "" {
		return "invalid " + e.Destination + " params: " + e.Problem
	}
	return "invalid " + e.Destination + " params: " + e.Field + ": " + e.Problem
}

// ParseParams decodes params (a JSON object; empty reads as {}) into v
// strictly: unknown fields and trailing data are rejected. Errors are a
// *ParamsError wrapped by retrypolicy.Permanent, never quoting a value.
func ParseParams(destination string, params json.RawMessage, v any) error {
	p := bytes.TrimSpace(params)
	if len(p) == 0 {
		p = []byte(`{}`)
	}
	if p[0] != '{' {
		return retrypolicy.Permanent(&ParamsError{Destination: destination, Problem: "must be a JSON object"})
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return retrypolicy.Permanent(&ParamsError{Destination: destination, Problem: paramsProblem(err)})
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return retrypolicy.Permanent(&ParamsError{Destination: destination, Problem: "must be a single JSON object with nothing after it"})
	}
	return nil
}

// paramsProblem turns a decoding error into words that name fields, never
// values.
func paramsProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q must be of type %s", Clip(te.Field, 40), te.Type)
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return "unknown field " + Clip(strings.TrimPrefix(msg, "json: unknown field "), 42)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("not valid JSON (at byte %d)", se.Offset)
	}
	return "not a valid JSON object"
}
