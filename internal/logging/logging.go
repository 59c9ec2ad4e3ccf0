package logging

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// New returns a JSON logger writing to w at the level named by level
// ("debug", "info", "warn", "error"; default info).
func New(w io.Writer, level string) *slog.Logger {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		lv = slog.LevelInfo
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv, ReplaceAttr: redact})
	return slog.New(&requestIDHandler{Handler: h})
}

// FromEnv returns New(os.Stdout, $LOG_LEVEL).
func FromEnv() *slog.Logger { return New(os.Stdout, os.Getenv("LOG_LEVEL")) }

// Discard is a logger that writes nothing (tests).
func Discard() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

var secretKeys = []string{"password", "secret", "token", "api_key", "apikey", "authorization", "credential", "prompt", "input", "result", "output", "text"}

// redact replaces attribute values whose key suggests a secret or task text.
func redact(_ []string, a slog.Attr) slog.Attr {
	k := strings.ToLower(a.Key)
	for _, s := range secretKeys {
		if k == s || strings.HasSuffix(k, "_"+s) {
			return slog.String(a.Key, "[redacted]")
		}
	}
	return a
}

// requestIDHandler adds the Lambda request id from the context.
type requestIDHandler struct{ slog.Handler }

func (h *requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String("request_id", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h *requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h *requestIDHandler) WithGroup(name string) slog.Handler {
	return &requestIDHandler{h.Handler.WithGroup(name)}
}
