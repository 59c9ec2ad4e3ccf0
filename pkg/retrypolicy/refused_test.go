package retrypolicy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Refused: only a call turned away in so many words is one the provider
// certainly did not act on — whatever class an adapter steered it to.
func TestRefused(t *testing.T) {
	t.Parallel()
	status := func(code int) error { return &retrypolicy.StatusError{StatusCode: code} }
	aws := func(code string, status int) error {
		return &responseError{status: status, err: &apiError{code: code, msg: "m"}}
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"not sent", fmt.Errorf("wait: %w", retrypolicy.ErrRequestNotSent), true},
		{"not sent, steered", retrypolicy.Retryable(retrypolicy.ErrRequestNotSent), true},
		{"400", status(400), true},
		{"401", status(401), true},
		{"404", status(404), true},
		{"408", status(408), true},
		{"422", status(422), true},
		{"429", status(429), true},
		{"409: a request with the key in progress", status(409), false},
		{"424: the model failed while processing", status(424), false},
		{"500", status(500), false},
		{"502", status(502), false},
		{"504", status(504), false},
		// A webhook steers a 3xx to Misconfigured and a 5xx to Throttled:
		// a 303 See Other is a processed POST's answer.
		{"webhook 303", retrypolicy.Misconfigured(fmt.Errorf("endpoint: %w", status(303))), false},
		{"webhook 301", retrypolicy.Misconfigured(fmt.Errorf("endpoint: %w", status(301))), false},
		{"webhook 503", retrypolicy.Throttled(fmt.Errorf("endpoint: %w", status(503)), 0), false},
		{"webhook 429", retrypolicy.Throttled(fmt.Errorf("endpoint: %w", status(429)), 0), true},
		// Bedrock steers its throttle to Throttled; the SDK's response
		// error carries the status and the code, no StatusError.
		{"bedrock throttle", retrypolicy.Throttled(aws("ThrottlingException", 429), 0), true},
		{"bedrock quota", retrypolicy.Throttled(aws("ServiceQuotaExceededException", 400), 0), true},
		{"bedrock model error (424)", aws("ModelErrorException", 424), false},
		{"bedrock malformed output", retrypolicy.Retryable(errors.New("bedrock: malformed_model_output")), false},
		// A 2xx whose generation a content filter stopped: the model ran.
		{"content filter", retrypolicy.Permanent(fmt.Errorf("stopped by a content filter: %w", retrypolicy.ErrActed)), false},
		{"aws throttling code alone", &apiError{code: "ThrottlingException"}, true},
		{"aws 500", aws("InternalServerException", 500), false},
		// Refused before a request: an input or a configuration the
		// adapter checks first.
		{"steered input, no response", retrypolicy.Permanent(errors.New("prompt too long")), true},
		{"steered config, no response", retrypolicy.Misconfigured(errors.New("secret unreadable")), true},
		{"uncertain", retrypolicy.Uncertain(status(400)), false},
		{"reset after send", fmt.Errorf("post: %w", io.ErrUnexpectedEOF), false},
		{"deadline", context.DeadlineExceeded, false},
		{"cancelled", context.Canceled, false},
		{"unclassified", errors.New("boom"), false},
	} {
		if got := retrypolicy.Refused(c.err); got != c.want {
			t.Errorf("%s: Refused(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
