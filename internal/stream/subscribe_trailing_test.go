package stream_test

import (
	"errors"
	"testing"

	"github.com/taskledger/taskledger/internal/stream"
)

// A subscribe followed by a stray closing bracket or brace is not "a JSON
// object and nothing else".
func TestParseSubscribeRefusesATrailingClosingDelimiter(t *testing.T) {
	t.Parallel()
	for _, tail := range []string{"]", "}", "}}"} {
		msg := `{"action":"subscribe","task_id":"t_abc"}` + tail
		if _, err := stream.ParseSubscribe([]byte(msg)); !errors.Is(err, stream.ErrBadMessage) {
			t.Errorf("%q: %v, want ErrBadMessage", msg, err)
		}
	}
}
