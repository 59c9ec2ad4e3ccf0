package soak

import (
	"context"
	"log/slog"
	"strings"
)

// discardedLog is the worker's message for a completion it believes was
// rejected.
const discardedLog = "result discarded"

// watchLog wraps the handlers' log handler and reports every record whose
// message says a result was discarded, with its task_id and version
// attributes (from the record or the logger's With).
type watchLog struct {
	inner slog.Handler
	attrs []slog.Attr
	seen  func(taskID string, version int64)
}

func (h *watchLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.inner.Enabled(ctx, l)
}

func (h *watchLog) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, discardedLog) {
		var id string
		var version int64
		look := func(a slog.Attr) bool {
			switch a.Key {
			case "task_id":
				id = a.Value.String()
			case "version":
				if a.Value.Kind() == slog.KindInt64 {
					version = a.Value.Int64()
				}
			}
			return true
		}
		for _, a := range h.attrs {
			look(a)
		}
		r.Attrs(look)
		h.seen(id, version)
	}
	if !h.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h *watchLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &watchLog{inner: h.inner.WithAttrs(as), attrs: append(append([]slog.Attr(nil), h.attrs...), as...), seen: h.seen}
}

func (h *watchLog) WithGroup(name string) slog.Handler {
	return &watchLog{inner: h.inner.WithGroup(name), attrs: h.attrs, seen: h.seen}
}
