package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ActionSubscribe is the one action a client sends.
const ActionSubscribe = "subscribe"

// Subprotocol is the WebSocket subprotocol the gateway answers with. A
// client offers it and, to authenticate, a second protocol
// BearerProtocolPrefix+<JWT>; the token is never echoed back.
const (
	Subprotocol          = "taskledger.v1"
	BearerProtocolPrefix = "bearer."
)

// DeltaFrame is a piece of a generation's text. The frames of one (task,
// attempt) to one connection are numbered 1, 2, 3, … (Seq), and their
// Delta values, concatenated in that order, are the text generated so
// far: the first frame a connection gets for an attempt starts at the
// first character (a late subscriber's first frame holds the text so
// far). A frame carries whatever arrived since the previous one (several
// provider chunks, coalesced), at most MaxFrameText bytes.
type DeltaFrame struct {
	TaskID  string `json:"task_id"`
	Attempt int    `json:"attempt"`
	Seq     int    `json:"seq"`
	Delta   string `json:"delta"`
}

// DoneFrame ends an attempt's stream, sent only after its result was
// saved: State is the task's state after the save (completed, or
// awaiting_approval for a gated task) and ResultSHA256 the saved result's
// hash, as the task view's result_sha256.
type DoneFrame struct {
	TaskID       string `json:"task_id"`
	Attempt      int    `json:"attempt"`
	Done         bool   `json:"done"`
	State        string `json:"state"`
	ResultSHA256 string `json:"result_sha256"`
}

// ErrorFrame answers a message the gateway refused (a subscribe to a task
// that is not the caller's, a malformed message). Code is stable; the
// connection stays open.
type ErrorFrame struct {
	Error  string `json:"error"`
	TaskID string `json:"task_id,omitempty"`
	Detail string `json:"detail"`
}

// Error codes of ErrorFrame.
const (
	CodeBadMessage   = "bad-message"
	CodeTaskNotFound = "task-not-found"
	CodeUnavailable  = "unavailable"
)

// SubscribedFrame acknowledges a subscribe.
type SubscribedFrame struct {
	Subscribed string `json:"subscribed"`
}

// Subscribe is the one message a client sends.
type Subscribe struct {
	Action string `json:"action"`
	TaskID string `json:"task_id"`
}

// MaxMessageBytes bounds a client's message.
const MaxMessageBytes = 1024

// ErrBadMessage is a client message that is not a subscribe.
var ErrBadMessage = errors.New("stream: not a subscribe message")

// ParseSubscribe reads a client message strictly: a JSON object with
// action "subscribe" and a task_id of printable ASCII, nothing else.
func ParseSubscribe(body []byte) (Subscribe, error) {
	if len(body) > MaxMessageBytes {
		return Subscribe{}, fmt.Errorf("%w: over %d bytes", ErrBadMessage, MaxMessageBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var s Subscribe
	if err := dec.Decode(&s); err != nil {
		return Subscribe{}, fmt.Errorf("%w: want {\"action\":\"subscribe\",\"task_id\":\"...\"}", ErrBadMessage)
	}
	// Anything after the object, a stray ] or } included (which dec.More
	// does not report), is trailing data.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Subscribe{}, fmt.Errorf("%w: trailing data", ErrBadMessage)
	}
	if s.Action != ActionSubscribe {
		return Subscribe{}, fmt.Errorf("%w: action must be %q", ErrBadMessage, ActionSubscribe)
	}
	if s.TaskID == "" || len(s.TaskID) > 128 || strings.IndexFunc(s.TaskID, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return Subscribe{}, fmt.Errorf("%w: task_id must be 1-128 printable ASCII characters", ErrBadMessage)
	}
	return s, nil
}

// BearerFromProtocols returns the token offered in a Sec-WebSocket-Protocol
// header value ("taskledger.v1, bearer.<jwt>"), or "".
func BearerFromProtocols(header string) string {
	for _, p := range strings.Split(header, ",") {
		p = strings.TrimSpace(p)
		if strings.HasPrefix(p, BearerProtocolPrefix) {
			return strings.TrimPrefix(p, BearerProtocolPrefix)
		}
	}
	return ""
}
